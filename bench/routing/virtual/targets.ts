/**
 * `bench:virtual`'s targets: an entry of `--targets` in, the gateway settings of that target
 * out. `ref:affinity` is `bench:routing`'s (consistent_hashing on each request's conversation
 * key, `trace_keys.ts`); any other entry is `[smg:]POLICY[/VARIANT][:FLAGS]`: a policy name,
 * `bench:routing`'s variant flags (`/smg`: SMG's scoring, `/tree`, `/plain-tree`), then gateway
 * flags as the gateway takes them (`cache_aware:--cache-aware-scoring smg`), and last `#N` (N
 * routers behind a round-robin front) or `#N-mesh` (on a mesh, `mesh.ts`). The settings are
 * built as the gateway builds them: its command-line parser over its defaults, then its
 * validation, with `--worker-urls`, `--policy` and `--random-seed` as `bench:routing` starts it.
 */

import type { GatewayConfig } from "../../../lib/config/config.ts";
import { POLICY_NAMES } from "../../../lib/config/config.ts";
import { parseGatewayArgs } from "../../../lib/config/cli.ts";
import { validateConfig } from "../../../lib/config/validate.ts";
import { SMG_SCORING, VARIANTS } from "../targets.ts";

/** One target to replay. */
export interface VirtualTarget {
  /** The entry as given (the report's row name). */
  name: string;
  /** The policy. */
  policy: string;
  /** Gateway flags beyond `--policy` (a variant's, then the entry's own). */
  flags: string[];
  /** `ref:affinity`: each request carries its conversation key as `X-SMG-Routing-Key`. */
  affinity: boolean;
  /** Routers behind a round-robin front (`#N`, default 1), on a mesh (`#N-mesh`). */
  routers: number;
  mesh: boolean;
}

/** The target an entry names; throws naming the entry when it names none. */
export function parseTarget(entry: string): VirtualTarget {
  const routed = /^(.+)#(\d+)(-mesh)?$/.exec(entry);
  if (routed) {
    const n = Number(routed[2]);
    if (n < 1) throw new Error(`--targets: ${entry}: #N takes N ≥ 1`);
    return { ...parseTarget(routed[1]), name: entry, routers: n, mesh: routed[3] !== undefined };
  }
  if (entry === "ref:affinity") {
    const one = { routers: 1, mesh: false };
    return { name: entry, policy: "consistent_hashing", flags: [], affinity: true, ...one };
  }
  if (entry.startsWith("ref:")) {
    throw new Error(`--targets: ${entry}: the virtual replay has ref:affinity only`);
  }
  const bare = entry.replace(/^smg:/, "");
  const colon = bare.indexOf(":");
  const head = colon < 0 ? bare : bare.slice(0, colon);
  const own = colon < 0 ? [] : bare.slice(colon + 1).split(/\s+/).filter(Boolean);
  const [policy, variant] = head.split("/", 2);
  if (!(POLICY_NAMES as readonly string[]).includes(policy)) {
    throw new Error(
      `--targets: ${entry}: no policy '${policy}'; known: ${POLICY_NAMES.join(", ")}`,
    );
  }
  let flags: string[] = [];
  if (variant !== undefined) {
    const known = variant === "smg" ? SMG_SCORING[policy] : VARIANTS[policy]?.[variant];
    if (!known) throw new Error(`--targets: ${entry}: no variant '${variant}' of ${policy}`);
    flags = [...known];
  }
  return {
    name: entry,
    policy,
    flags: [...flags, ...own],
    affinity: false,
    routers: 1,
    mesh: false,
  };
}

/**
 * The gateway settings of `t` in front of `urls` with `--random-seed seed`, parsed and
 * validated as the gateway does; throws the gateway's own error for a bad flag.
 */
export function targetConfig(
  t: VirtualTarget,
  urls: readonly string[],
  seed: number,
): GatewayConfig {
  return validateConfig(
    parseGatewayArgs([
      "--worker-urls",
      ...urls,
      "--policy",
      t.policy,
      ...t.flags,
      "--random-seed",
      String(seed),
    ]),
  );
}
