/**
 * Kubernetes service discovery's flags for the gateway's flag table (`flags.ts`), with SMG's
 * names and defaults: `--service-discovery`, `--selector`, `--prefill-selector`,
 * `--decode-selector`, `--service-discovery-port`, `--service-discovery-namespace`,
 * `--model-id-from` and `--router-selector`. A selector is `key=value` pairs, as separate
 * arguments or several in one (separated by spaces or commas).
 */

import { badValue } from "../core/errors.ts";
import type { ModelIdSource } from "./config.ts";
import type { FlagSpec } from "./flags.ts";

type SelectorKey = "selector" | "prefillSelector" | "decodeSelector" | "routerSelector";

function selectorFlag(name: string, key: SelectorKey, help: string): FlagSpec {
  return {
    name,
    kind: "list",
    help,
    apply: (c, v: string[]) => (c.discovery[key] = parseSelector(name, v)),
  };
}

/** `k=v` pairs from one flag's arguments; throws naming the flag for a malformed pair. */
export function parseSelector(flag: string, args: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of args.flatMap((a) => a.split(/[\s,]+/)).filter((x) => x !== "")) {
    const eq = item.indexOf("=");
    const key = item.slice(0, eq);
    const value = item.slice(eq + 1);
    // Kubernetes label keys: an optional DNS prefix and a name; values may be empty.
    if (eq < 1 || !/^([a-z0-9.-]+\/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/.test(key)) {
      throw badValue(`--${flag}`, item, "expected key=value (a Kubernetes label)");
    }
    if (!/^([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)?$/.test(value) || value.length > 63) {
      throw badValue(`--${flag}`, item, "the value is not a valid label value");
    }
    out[key] = value;
  }
  return out;
}

/** `namespace`, `label:KEY` or `annotation:KEY`; throws otherwise. */
export function parseModelIdFrom(v: string): ModelIdSource {
  if (v === "namespace") return { from: "namespace" };
  const m = /^(label|annotation):(.+)$/.exec(v);
  if (!m) throw badValue("--model-id-from", v, "allowed: namespace, label:KEY, annotation:KEY");
  return { from: m[1] as "label" | "annotation", key: m[2] };
}

/** The discovery flags, in --help order. */
export const DISCOVERY_FLAGS: FlagSpec[] = [
  {
    name: "service-discovery",
    kind: "bool",
    help: "register Kubernetes pods matching --selector as workers",
    apply: (c, v) => (c.discovery.enabled = v),
  },
  selectorFlag("selector", "selector", "labels of worker pods, key=value..."),
  selectorFlag("prefill-selector", "prefillSelector", "PD: labels of prefill pods, key=value..."),
  selectorFlag("decode-selector", "decodeSelector", "PD: labels of decode pods, key=value..."),
  {
    name: "service-discovery-port",
    kind: "int",
    help: "port of discovered workers",
    apply: (c, v) => (c.discovery.port = v),
    shown: (d) => d.discovery.port,
  },
  {
    name: "service-discovery-namespace",
    kind: "string",
    help: "namespace to watch (default: all)",
    apply: (c, v) => (c.discovery.namespace = v),
  },
  {
    name: "model-id-from",
    kind: "string",
    help: "a discovered worker's model id: namespace, label:KEY or annotation:KEY",
    apply: (c, v: string) => (c.discovery.modelIdFrom = parseModelIdFrom(v)),
  },
  selectorFlag(
    "router-selector",
    "routerSelector",
    "with --enable-mesh: labels of router pods, key=value...",
  ),
];
