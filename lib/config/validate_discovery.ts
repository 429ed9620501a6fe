/**
 * Start-up checks of the service-discovery flags: a selector for what is discovered (worker
 * pods, or both PD legs), none without `--service-discovery`, a port in range, a non-empty
 * namespace, and `--router-selector` only with the mesh on.
 */

import { badValue } from "../core/errors.ts";
import type { GatewayConfig } from "./config.ts";

const empty = (s: Record<string, string>) => Object.keys(s).length === 0;
const shown = (s: Record<string, string>) =>
  Object.entries(s).map(([k, v]) => `${k}=${v}`).join(" ");

/** Throws the first problem in the discovery flags. */
export function validateDiscovery(c: GatewayConfig): void {
  const d = c.discovery;
  if (!empty(d.routerSelector) && !c.mesh.enabled) {
    throw badValue("--router-selector", shown(d.routerSelector), "needs --enable-mesh");
  }
  if (!empty(d.routerSelector) && !d.enabled) {
    throw badValue("--router-selector", shown(d.routerSelector), "needs --service-discovery");
  }
  if (!d.enabled) {
    for (
      const [flag, sel] of [
        ["--selector", d.selector],
        ["--prefill-selector", d.prefillSelector],
        ["--decode-selector", d.decodeSelector],
      ] as const
    ) {
      if (!empty(sel)) throw badValue(flag, shown(sel), "needs --service-discovery");
    }
    if (d.modelIdFrom !== null) {
      throw badValue("--model-id-from", d.modelIdFrom.from, "needs --service-discovery");
    }
    return;
  }
  if (!Number.isInteger(d.port) || d.port < 1 || d.port > 65535) {
    throw badValue("--service-discovery-port", d.port, "allowed: 1..65535");
  }
  if (d.namespace !== null && d.namespace.trim() === "") {
    throw badValue("--service-discovery-namespace", d.namespace, "must not be empty");
  }
  if (c.pd.enabled) {
    if (empty(d.prefillSelector) || empty(d.decodeSelector)) {
      throw badValue(
        "--prefill-selector/--decode-selector",
        "",
        "PD discovery needs both (pods matching neither are not workers)",
      );
    }
    if (!empty(d.selector)) {
      throw badValue(
        "--selector",
        shown(d.selector),
        "use --prefill-selector and --decode-selector with --pd-disaggregation",
      );
    }
  } else {
    if (empty(d.selector) && empty(d.routerSelector)) {
      throw badValue("--selector", "", "required with --service-discovery (every pod would match)");
    }
    if (!empty(d.prefillSelector) || !empty(d.decodeSelector)) {
      throw badValue(
        "--prefill-selector/--decode-selector",
        shown({ ...d.prefillSelector, ...d.decodeSelector }),
        "need --pd-disaggregation",
      );
    }
  }
}
