/**
 * The tenant-rate-limit file (`--tenant-rate-limit-config`), SMG's YAML: a `default_policy`
 * (without `tenant_key`) and `tenants: [{tenant_key, tokens_per_minute, requests_per_minute,
 * model_rules: [{rule_id, matcher: {type: exact|prefix, value}, tokens_per_minute,
 * requests_per_minute}]}]`. Checked as SMG checks it: both limits given and above 0 (and within
 * u32), unknown fields refused, tenant keys canonical (`auth:<id>`, `header:<id>`, `ip:<addr>`,
 * `anonymous`), unpadded and unique, rule ids `[A-Za-z0-9._-]+` and unique per policy, matcher
 * values non-empty and unpadded, no matcher twice; `header:` keys only with
 * `--trust-tenant-header` (they could never match otherwise). Any problem is a `ConfigError`
 * naming the file, the line and the key (main exits 2).
 */

import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument, type YAMLMap } from "yaml";
import { ConfigError } from "../core/errors.ts";
import { isCanonicalTenantKey } from "./tenant_key.ts";

/** Tokens and requests a scope may take per minute (the buckets' capacities). */
export interface ScopeLimits {
  /** LLM tokens (prompt and completion) per minute. */
  tokensPerMinute: number;
  /** Requests per minute. */
  requestsPerMinute: number;
}

/** A per-model rule layered on a tenant's own limits (at most one applies to a request). */
export interface ModelRule {
  /** Unique within its policy. */
  ruleId: string;
  /** Which models: `exact` equals the value, `prefix` starts with it. */
  matcher: { type: "exact" | "prefix"; value: string };
  /** The rule's limits. */
  limits: ScopeLimits;
}

/** The default policy, or one tenant's. */
export interface TenantPolicy {
  /** The tenant's canonical key; null on the default policy. */
  tenantKey: string | null;
  /** The tenant's own limits, over all models. */
  limits: ScopeLimits;
  /** Per-model rules. */
  modelRules: ModelRule[];
}

/** The whole file. */
export interface LimitsFile {
  /** Applies to every tenant without an entry. */
  defaultPolicy: TenantPolicy;
  /** Per-tenant policies. */
  tenants: TenantPolicy[];
}

const U32_MAX = 4_294_967_295;
const RULE_ID = /^[A-Za-z0-9._-]+$/;

/** Where a problem is reported: the file, and the line of a node. */
class Place {
  readonly #file: string;
  readonly #lines: LineCounter;
  constructor(file: string, lines: LineCounter) {
    this.#file = file;
    this.#lines = lines;
  }
  /** A ConfigError at `node`'s line about `key`. */
  error(node: Node | null | undefined, key: string, problem: string): ConfigError {
    const at = node?.range ? `line ${this.#lines.linePos(node.range[0]).line}: ` : "";
    return new ConfigError(`--tenant-rate-limit-config ${this.#file}: ${at}${key}: ${problem}`);
  }
}

/** The pairs of a mapping by key, refusing keys outside `known`. */
function fields(
  p: Place,
  node: Node | null | undefined,
  path: string,
  known: readonly string[],
): Map<string, { key: Node; value: Node | null }> {
  if (!isMap(node)) throw p.error(node, path, "expected a mapping");
  const out = new Map<string, { key: Node; value: Node | null }>();
  for (const pair of (node as YAMLMap<Node, Node | null>).items) {
    const k = isScalar(pair.key) ? String(pair.key.value) : null;
    const name = path === "" ? String(k) : `${path}.${k}`;
    if (k === null || !known.includes(k)) {
      throw p.error(pair.key, name, `unknown field (expected one of: ${known.join(", ")})`);
    }
    out.set(k, { key: pair.key, value: pair.value ?? null });
  }
  return out;
}

function required(
  p: Place,
  f: Map<string, { key: Node; value: Node | null }>,
  owner: Node | null | undefined,
  path: string,
  name: string,
): Node | null {
  const e = f.get(name);
  if (!e) throw p.error(owner, path === "" ? name : `${path}.${name}`, "is required");
  return e.value;
}

function str(p: Place, node: Node | null, key: string): string {
  if (!isScalar(node) || typeof node.value !== "string") throw p.error(node, key, "expected text");
  return node.value;
}

function limit(p: Place, node: Node | null, key: string): number {
  const v = isScalar(node) ? node.value : undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v <= 0 || v > U32_MAX) {
    throw p.error(node, key, `must be a whole number > 0 (got ${isScalar(node) ? v : "nothing"})`);
  }
  return v;
}

function limitsOf(
  p: Place,
  f: Map<string, { key: Node; value: Node | null }>,
  owner: Node | null,
  path: string,
): ScopeLimits {
  return {
    tokensPerMinute: limit(
      p,
      required(p, f, owner, path, "tokens_per_minute"),
      `${path}.tokens_per_minute`,
    ),
    requestsPerMinute: limit(
      p,
      required(p, f, owner, path, "requests_per_minute"),
      `${path}.requests_per_minute`,
    ),
  };
}

function rule(p: Place, node: Node | null, path: string): ModelRule {
  const f = fields(p, node, path, [
    "rule_id",
    "matcher",
    "tokens_per_minute",
    "requests_per_minute",
  ]);
  const idNode = required(p, f, node, path, "rule_id");
  const ruleId = str(p, idNode, `${path}.rule_id`);
  if (!RULE_ID.test(ruleId)) {
    throw p.error(idNode, `${path}.rule_id`, `'${ruleId}' must match [A-Za-z0-9._-]+`);
  }
  const mNode = required(p, f, node, path, "matcher");
  const m = fields(p, mNode, `${path}.matcher`, ["type", "value"]);
  const typeNode = required(p, m, mNode, `${path}.matcher`, "type");
  const type = str(p, typeNode, `${path}.matcher.type`);
  if (type !== "exact" && type !== "prefix") {
    throw p.error(typeNode, `${path}.matcher.type`, `'${type}': expected exact or prefix`);
  }
  const valueNode = required(p, m, mNode, `${path}.matcher`, "value");
  const value = str(p, valueNode, `${path}.matcher.value`);
  if (value.trim() === "") throw p.error(valueNode, `${path}.matcher.value`, "must not be empty");
  if (value.trim() !== value) {
    throw p.error(valueNode, `${path}.matcher.value`, `'${value}' has surrounding whitespace`);
  }
  return { ruleId, matcher: { type, value }, limits: limitsOf(p, f, node, path) };
}

function policy(
  p: Place,
  node: Node | null,
  path: string,
  trustTenantHeader: boolean,
): TenantPolicy {
  const f = fields(p, node, path, [
    "tenant_key",
    "tokens_per_minute",
    "requests_per_minute",
    "model_rules",
  ]);
  let tenantKey: string | null = null;
  const keyEntry = f.get("tenant_key");
  if (path === "default_policy") {
    if (keyEntry) throw p.error(keyEntry.key, `${path}.tenant_key`, "not allowed on the default");
  } else {
    const k = required(p, f, node, path, "tenant_key");
    tenantKey = str(p, k, `${path}.tenant_key`);
    const problem = tenantKey.trim() === ""
      ? "must not be empty"
      : tenantKey.trim() !== tenantKey
      ? `'${tenantKey}' has surrounding whitespace`
      : !isCanonicalTenantKey(tenantKey)
      ? `'${tenantKey}' is not a tenant key (auth:<id>, header:<id>, ip:<address>, anonymous)`
      : tenantKey.startsWith("header:") && !trustTenantHeader
      ? `'${tenantKey}' can never match without --trust-tenant-header`
      : null;
    if (problem) throw p.error(k, `${path}.tenant_key`, problem);
  }
  const modelRules: ModelRule[] = [];
  const rulesNode = f.get("model_rules")?.value ?? null;
  if (rulesNode !== null && !(isScalar(rulesNode) && rulesNode.value === null)) {
    if (!isSeq(rulesNode)) throw p.error(rulesNode, `${path}.model_rules`, "expected a list");
    const ids = new Set<string>();
    const matchers = new Map<string, string>();
    rulesNode.items.forEach((item, i) => {
      const at = `${path}.model_rules[${i}]`;
      const r = rule(p, item as Node, at);
      if (ids.has(r.ruleId)) throw p.error(item as Node, at, `duplicate rule_id '${r.ruleId}'`);
      ids.add(r.ruleId);
      const mk = `${r.matcher.type}\u0000${r.matcher.value}`;
      const other = matchers.get(mk);
      if (other) throw p.error(item as Node, at, `same matcher as rule '${other}'`);
      matchers.set(mk, r.ruleId);
      modelRules.push(r);
    });
  }
  return { tenantKey, limits: limitsOf(p, f, node, path), modelRules };
}

/** Parses and checks the text of a limits file read from `file`; throws `ConfigError`. */
export function parseLimits(text: string, file: string, trustTenantHeader: boolean): LimitsFile {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const p = new Place(file, lines);
  if (doc.errors.length > 0) {
    const e = doc.errors[0];
    const line = `line ${lines.linePos(e.pos[0]).line}: `;
    throw new ConfigError(`--tenant-rate-limit-config ${file}: ${line}${e.message}`);
  }
  const root = doc.contents as Node | null;
  if (!isMap(root)) throw p.error(root, "(top level)", "expected a mapping");
  const f = fields(p, root, "", ["default_policy", "tenants"]);
  const defaultPolicy = policy(
    p,
    required(p, f, root, "", "default_policy"),
    "default_policy",
    trustTenantHeader,
  );
  const tenants: TenantPolicy[] = [];
  const tNode = f.get("tenants")?.value ?? null;
  if (tNode !== null && !(isScalar(tNode) && tNode.value === null)) {
    if (!isSeq(tNode)) throw p.error(tNode, "tenants", "expected a list");
    const seen = new Set<string>();
    tNode.items.forEach((item, i) => {
      const t = policy(p, item as Node, `tenants[${i}]`, trustTenantHeader);
      if (seen.has(t.tenantKey!)) {
        throw p.error(item as Node, `tenants[${i}].tenant_key`, `duplicate '${t.tenantKey}'`);
      }
      seen.add(t.tenantKey!);
      tenants.push(t);
    });
  }
  return { defaultPolicy, tenants };
}

/** Reads and checks the limits file at `path`; throws `ConfigError`. */
export function loadLimits(path: string, trustTenantHeader: boolean): LimitsFile {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    const why = e instanceof Deno.errors.NotCapable
      ? `no read permission (run with --allow-read=${path})`
      : (e as Error).message;
    throw new ConfigError(`--tenant-rate-limit-config: cannot read '${path}': ${why}`);
  }
  return parseLimits(text, path, trustTenantHeader);
}
