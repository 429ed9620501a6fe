/**
 * Kubernetes service discovery's flags, declared once (see `flag.ts`), with SMG's names and
 * defaults: `--service-discovery`, `--selector`, `--prefill-selector`, `--decode-selector`,
 * `--service-discovery-port`, `--service-discovery-namespace`, `--model-id-from` and
 * `--router-selector`. A selector is `key=value` pairs, as separate arguments or several in one
 * (separated by spaces or commas). Port and namespace are checked only with discovery on; the
 * checks that join several flags are in `validate.ts`.
 */

import { badValue } from "../core/errors.ts";
import { dialPort, nonEmpty } from "./checks.ts";
import type { Flags, Kind } from "./flag.ts";
import { bool, int, str } from "./kinds.ts";
import type { DiscoveryConfig, ModelIdSource } from "./types.ts";

/** `k=v` pairs from one flag's arguments; throws naming `flag` for a malformed pair. */
function parseSelector(flag: string, args: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of args.flatMap((a) => a.split(/[\s,]+/)).filter((x) => x !== "")) {
    const eq = item.indexOf("=");
    const key = item.slice(0, eq);
    const value = item.slice(eq + 1);
    // Kubernetes label keys: an optional DNS prefix and a name; values may be empty.
    if (eq < 1 || !/^([a-z0-9.-]+\/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/.test(key)) {
      throw badValue(flag, item, "expected key=value (a Kubernetes label)");
    }
    if (!/^([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)?$/.test(value) || value.length > 63) {
      throw badValue(flag, item, "the value is not a valid label value");
    }
    out[key] = value;
  }
  return out;
}

/** Label selectors, `key=value...`. */
const selector: Kind<Record<string, string>> = {
  takes: "values",
  parse: parseSelector,
  show: (s) => Object.entries(s).map(([k, v]) => `${k}=${v}`).join(" "),
};

/** Where a discovered worker's model id comes from: `namespace`, `label:KEY` or `annotation:KEY`. */
const modelIdSource: Kind<ModelIdSource> = {
  takes: "value",
  parse: (flag, v) => {
    if (v === "namespace") return { from: "namespace" };
    const m = /^(label|annotation):(.+)$/.exec(v);
    if (!m) throw badValue(flag, v, "allowed: namespace, label:KEY, annotation:KEY");
    return { from: m[1] as "label" | "annotation", key: m[2] };
  },
  show: (s) => (s.from === "namespace" ? s.from : `${s.from}:${s.key}`),
};

/** The discovery flags, in --help order. */
export const DISCOVERY_FLAGS: Flags<DiscoveryConfig> = {
  enabled: {
    name: "service-discovery",
    kind: bool,
    default: false,
    help: "register Kubernetes pods matching --selector as workers",
  },
  selector: {
    name: "selector",
    kind: selector,
    default: {},
    help: "labels of worker pods, key=value...",
  },
  prefillSelector: {
    name: "prefill-selector",
    kind: selector,
    default: {},
    help: "PD: labels of prefill pods, key=value...",
  },
  decodeSelector: {
    name: "decode-selector",
    kind: selector,
    default: {},
    help: "PD: labels of decode pods, key=value...",
  },
  port: {
    name: "service-discovery-port",
    kind: int,
    default: 80,
    help: "port of discovered workers",
    check: dialPort,
  },
  namespace: {
    name: "service-discovery-namespace",
    kind: str,
    default: null,
    help: "namespace to watch (default: all)",
    check: nonEmpty,
  },
  modelIdFrom: {
    name: "model-id-from",
    kind: modelIdSource,
    default: null,
    help: "a discovered worker's model id: namespace, label:KEY or annotation:KEY",
  },
  routerSelector: {
    name: "router-selector",
    kind: selector,
    default: {},
    help: "with --enable-mesh: labels of router pods, key=value...",
  },
};
