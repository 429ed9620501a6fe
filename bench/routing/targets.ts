/**
 * The targets of the routing benchmark, by name: the references `ref:upper-bound`, `ref:oracle`
 * and `ref:affinity` (`references.ts`), `smg:<policy>` for every policy name SMG knows (and
 * `smg:<policy>/smg` with SMG's scoring where ours is the default, and `smg:cache_aware/tree`
 * without KV events),
 * `haproxy:<variant>` and `nginx:<variant>`; the `--targets` list resolved against them (an
 * `smg:` target may name several routers: `#N` behind a round-robin front, `#N-mesh` on a mesh);
 * the ones a workload gives no meaning to; and starting one target in front of a fleet.
 */

import { POLICY_NAMES } from "../../lib/config/config.ts";
import { type Started, startFront } from "./front.ts";
import { startGateway } from "./gateway.ts";
import type { TargetContext } from "./target_context.ts";
import { type Child, HOST } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import {
  HAPROXY_VARIANTS,
  type HaproxyVariant,
  NGINX_VARIANTS,
  type NginxVariant,
  startHaproxy,
  startNginx,
} from "./peers.ts";
import { type Reference, REFERENCE_WORKLOAD, REFERENCES } from "./references.ts";

/** One target, by kind. */
export type TargetSpec =
  | { name: string; kind: "ref"; ref: Reference }
  | {
    name: string;
    kind: "smg";
    policy: string;
    flags?: string[];
    /** Several routers behind a round-robin front (`#N`), on a mesh (`#N-mesh`). */
    routers?: { n: number; mesh: boolean };
  }
  | { name: string; kind: "haproxy"; variant: HaproxyVariant }
  | { name: string; kind: "nginx"; variant: NginxVariant };

/** Targets left out of the default list, with the reason printed when they are. */
export const NOT_BY_DEFAULT: Record<string, string> = {
  "smg:passthrough":
    "smg:passthrough left out by default: it sends everything to the first worker (meant for one worker); name it in --targets to include it",
  "smg:cache_aware/tree":
    "smg:cache_aware/tree left out by default: cache_aware on its tree only (--kv-events off), which differs from smg:cache_aware only where workers publish KV events (--connection-mode grpc or http-kv); name it in --targets to include it",
  "smg:cache_aware/plain-tree":
    "smg:cache_aware/plain-tree left out by default: cache_aware on its tree without corrections from the answers (--kv-events off --tree-feedback off); name it in --targets to include it",
};

/**
 * Variants of our policies with flags of ours (`smg:<policy>/<variant>`): `cache_aware/tree` is
 * cache_aware without KV events (its tree alone decides, corrected by the answers), and
 * `cache_aware/plain-tree` without the corrections too.
 */
export const VARIANTS: Record<string, Record<string, string[]>> = {
  cache_aware: {
    tree: ["--kv-events", "off"],
    "plain-tree": ["--kv-events", "off", "--tree-feedback", "off"],
  },
};

/**
 * Our policies whose default scoring departs from SMG's, with the flags that restore SMG's: the
 * `smg:<policy>/smg` targets.
 */
export const SMG_SCORING: Record<string, string[]> = {
  cache_aware: ["--cache-aware-scoring", "smg", "--wait-model", "smg"],
  power_of_two: ["--wait-model", "smg"],
  least_load: ["--wait-model", "smg"],
};

/** Every target there is, in report order: the references, our policies, HAProxy, nginx. */
export function allTargets(): TargetSpec[] {
  return [
    ...(Object.keys(REFERENCES) as Reference[]).map((ref) => ({
      name: `ref:${ref}`,
      kind: "ref" as const,
      ref,
    })),
    ...POLICY_NAMES.flatMap((policy) => [
      { name: `smg:${policy}`, kind: "smg" as const, policy },
      ...(policy in SMG_SCORING
        ? [{ name: `smg:${policy}/smg`, kind: "smg" as const, policy, flags: SMG_SCORING[policy] }]
        : []),
      ...Object.entries(VARIANTS[policy] ?? {}).map(([variant, flags]) => ({
        name: `smg:${policy}/${variant}`,
        kind: "smg" as const,
        policy,
        flags,
      })),
    ]),
    ...(Object.keys(HAPROXY_VARIANTS) as HaproxyVariant[]).map((variant) => ({
      name: `haproxy:${variant}`,
      kind: "haproxy" as const,
      variant,
    })),
    ...(Object.keys(NGINX_VARIANTS) as NginxVariant[]).map((variant) => ({
      name: `nginx:${variant}`,
      kind: "nginx" as const,
      variant,
    })),
  ];
}

/**
 * The targets a `--targets` list names (null: the default list). An entry is a full name
 * (`smg:round_robin`), a kind (`ref`, `smg`, `haproxy`, `nginx`: all of that kind but the ones left
 * out by default) or `all`; one of our policies' names may carry gateway flags after `@`, each
 * `--flag=value` (`smg:cache_aware@--cache-aware-work-weight=0.3`), and end in `#N` (N routers
 * behind a round-robin front) or `#N-mesh` (on a mesh), a target of its own. Throws on a name
 * that matches nothing.
 */
export function resolveTargets(list: string[] | null): { targets: TargetSpec[]; notes: string[] } {
  const all = allTargets();
  const byDefault = all.filter((t) => !(t.name in NOT_BY_DEFAULT));
  const notes: string[] = [];
  if (list === null) {
    return { targets: byDefault, notes: Object.values(NOT_BY_DEFAULT) };
  }
  const chosen = new Set<string>();
  const extra: TargetSpec[] = [];
  for (const entry of list) {
    const routed = /^(.+)#(\d+)(-mesh)?$/.exec(entry);
    if (routed) {
      const n = Number(routed[2]);
      const base = resolveTargets([routed[1]]).targets;
      if (base.length !== 1 || base[0].kind !== "smg" || n < 1) {
        throw new Error(`--targets: #N takes one smg:<policy> and N ≥ 1: '${entry}'`);
      }
      extra.push({ ...base[0], name: entry, routers: { n, mesh: routed[3] !== undefined } });
      continue;
    }
    const at = entry.indexOf("@");
    if (at > 0) {
      const base = all.find((t) => t.name === entry.slice(0, at));
      if (base?.kind !== "smg") {
        throw new Error(`--targets: flags only for smg:<policy>: '${entry}'`);
      }
      const flags = entry.slice(at + 1).split("@").flatMap((f) => f.split(/=(.*)/s, 2));
      extra.push({ ...base, name: entry, flags: [...(base.flags ?? []), ...flags] });
      continue;
    }
    const matches = entry === "all"
      ? byDefault
      : all.some((t) => t.kind === entry)
      ? byDefault.filter((t) => t.kind === entry)
      : all.filter((t) => t.name === entry);
    if (matches.length === 0) {
      throw new Error(
        `--targets: no target '${entry}'; known: ${all.map((t) => t.name).join(", ")}`,
      );
    }
    matches.forEach((t) => chosen.add(t.name));
  }
  return { targets: [...all.filter((t) => chosen.has(t.name)), ...extra], notes };
}

/**
 * The targets among `targets` that `workload` gives no meaning to, with the reason: the
 * references made for the other workload, and on a trace (whose requests carry no session id)
 * the peers that hash `X-Session-Id`.
 */
export function meaningless(
  targets: readonly TargetSpec[],
  workload: "synthetic" | "trace",
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of targets) {
    const only = t.kind === "ref" ? REFERENCE_WORKLOAD[t.ref] : undefined;
    if (only && only.only !== workload) out[t.name] = only.why;
    if (workload === "trace" && (t.kind === "haproxy" || t.kind === "nginx")) {
      if (t.variant === "hash-session") {
        out[t.name] = "hashes X-Session-Id, which trace requests do not carry";
      }
    }
  }
  return out;
}

/**
 * Starts `t` as `c` says and resolves once it routes to every worker. `ref:oracle` and
 * `ref:affinity` are our gateway with `consistent_hashing` (the client names each request's
 * worker, or its conversation key); `ref:upper-bound` has no process in front of its single
 * worker, and throws here.
 */
export async function startTarget(t: TargetSpec, c: TargetContext): Promise<Started> {
  const ours = (child: Child, promPort: number): Started => ({
    children: [child],
    metrics: [`http://${HOST}:${promPort}/metrics`],
    routers: [child],
  });
  const peer = (child: Child): Started => ({ children: [child], metrics: [], routers: [] });
  const promPort = c.promPort ?? freePorts(1)[0];
  switch (t.kind) {
    case "ref":
      if (t.ref === "upper-bound") throw new Error(`${t.name} is sent the workload directly`);
      return ours(await startGateway("consistent_hashing", { ...c, promPort }), promPort);
    case "smg":
      if (t.routers) return startFront(t.policy, c, t.flags ?? [], t.routers.n, t.routers.mesh);
      return ours(await startGateway(t.policy, { ...c, promPort }, t.flags), promPort);
    case "haproxy":
      return peer(await startHaproxy(t.variant, c));
    case "nginx":
      return peer(await startNginx(t.variant, c));
  }
}

/** What each target is, for the report. */
export function describeTarget(t: TargetSpec): string {
  switch (t.kind) {
    case "ref":
      return REFERENCES[t.ref];
    case "smg": {
      const gw = `--policy ${t.policy}${t.flags ? ` ${t.flags.join(" ")}` : ""}`;
      const r = t.routers;
      return r
        ? `${r.n} of our gateways, ${gw}${r.mesh ? " on a mesh" : ""}, behind HAProxy round robin`
        : `our gateway, ${gw}`;
    }
    case "haproxy":
      return `HAProxy, ${HAPROXY_VARIANTS[t.variant].replace("\n  ", ", ")}`;
    case "nginx":
      return `nginx, ${NGINX_VARIANTS[t.variant]}`;
  }
}
