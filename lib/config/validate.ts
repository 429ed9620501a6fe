/**
 * Start-up validation. Each flag's declared check runs first (the mesh's only with the mesh on,
 * discovery's only with discovery on, as SMG), then the rules that join several settings, all
 * of them here: worker URLs and PD legs, policies, mesh, discovery, the start-up workers against
 * the egress allow-list (`egress.ts`), admission. The first violation throws a one-line
 * `ConfigError` (main exits 2), at its config-file line when a file set the flag; otherwise the
 * result is a normalised copy (worker URLs without a trailing slash, IPv6 mesh hosts in
 * brackets, ...).
 */

import { badValue, ConfigError } from "../core/errors.ts";
import { atLeast, nonEmpty } from "./checks.ts";
import { checkStartupWorkers } from "./egress.ts";
import type { ConfigSources } from "./file_settings.ts";
import type { Section } from "./flag.ts";
import { ENTRIES, holder, isFlag } from "./flags.ts";
import type { GatewayConfig, PdConfig } from "./types.ts";
import { isUnspecified, parseHostPort } from "../core/host_port.ts";

const WORKER_SCHEMES = new Set(["http:", "https:", "grpc:", "grpcs:"]);

/** Whether a (normalized) worker URL is a gRPC worker's. */
export function isGrpcUrl(url: string): boolean {
  return url.startsWith("grpc://") || url.startsWith("grpcs://");
}

/**
 * Checks a worker URL (http(s) or grpc(s) with a host) and returns its canonical form, no
 * trailing slash. A gRPC worker has a port and no path.
 */
export function normalizeWorkerUrl(raw: string, flag = "--worker-urls"): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw badValue(flag, raw, "expected an absolute URL such as http://127.0.0.1:8000");
  }
  if (!WORKER_SCHEMES.has(u.protocol) || !u.hostname) {
    throw badValue(flag, raw, "expected an http://, https://, grpc:// or grpcs:// URL with a host");
  }
  if (u.search || u.hash) throw badValue(flag, raw, "a worker URL has no query or fragment");
  const grpc = u.protocol === "grpc:" || u.protocol === "grpcs:";
  if (grpc && (!u.port || u.pathname.replace(/\/+$/, "") !== "")) {
    throw badValue(flag, raw, "a gRPC worker URL is grpc://host:port, with no path");
  }
  // Scheme and host are case-insensitive and a default port is implied: one worker, one URL.
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, "")}`;
}

/** Sections whose flags are checked only while this says the section is on. */
const CHECKED_WHEN: Partial<Record<Section, (c: GatewayConfig) => boolean>> = {
  mesh: (c) => c.mesh.enabled,
  discovery: (c) => c.discovery.enabled,
};

/**
 * The normalised copy of `config`; throws the first problem found. `config` is not changed. A
 * problem with a flag that `sources` says a config file set is reported at the file's line.
 */
export function validateConfig(
  config: GatewayConfig,
  sources: ConfigSources = new Map(),
): GatewayConfig {
  try {
    return validated(config);
  } catch (e) {
    const where = e instanceof ConfigError && e.flag ? sources.get(e.flag) : undefined;
    if (where === undefined) throw e;
    // `--port: invalid value ...` becomes `smg.yaml:3: port: invalid value ...`.
    throw new ConfigError(
      where + (e as ConfigError).message.slice((e as ConfigError).flag!.length),
    );
  }
}

function validated(config: GatewayConfig): GatewayConfig {
  const c = structuredClone(config);
  for (const { section, field, setting } of ENTRIES) {
    if (!isFlag(setting) || !setting.check) continue;
    if (section !== null && CHECKED_WHEN[section]?.(c) === false) continue;
    const into = holder(c, section);
    const v = into[field];
    if (v !== null && v !== undefined) into[field] = setting.check(`--${setting.name}`, v);
  }
  c.workerUrls = checkWorkerUrls(c);
  checkPolicies(c);
  c.pd = checkPd(c);
  checkMesh(c);
  checkDiscovery(c);
  checkTls(c);
  checkStartupWorkers(c);
  if (c.admission.queueSize > 0 && c.admission.queueTimeoutSecs === 0) {
    throw badValue("--queue-timeout-secs", 0, "must be >= 1 while --queue-size is above 0");
  }
  checkTenants(c);
  return c;
}

/** Tenant keys distinct from each other and from `--api-key`; the limits' file and scope. */
function checkTenants(c: GatewayConfig): void {
  const seen = new Map<string, string>();
  if (c.apiKey !== null) seen.set(c.apiKey, "--api-key");
  for (const pair of c.tenants.apiKeys) {
    const at = pair.indexOf(":");
    const id = pair.slice(0, at);
    const other = seen.get(pair.slice(at + 1));
    if (other !== undefined) {
      throw badValue(
        "--tenant-api-key",
        `${id}:***`,
        `the key is also ${other}'s; each key must name one tenant`,
      );
    }
    seen.set(pair.slice(at + 1), `tenant '${id}'`);
  }
  const rl = c.tenantRateLimit;
  if (rl.enabled && rl.configPath === null) {
    throw new ConfigError(
      "--tenant-rate-limit-config: required with --tenant-rate-limit-enabled",
    );
  }
  if (rl.enabled && rl.scope === "cluster" && !c.mesh.enabled) {
    throw badValue(
      "--tenant-rate-limit-scope",
      "cluster",
      "routers share their counts over the mesh: add --enable-mesh",
    );
  }
}

const GRPC_NEEDS_TOKENIZER = "gRPC workers take token ids: give --model-path or --tokenizer-path";

/** `--worker-urls`: well-formed, each once, gRPC ones with a tokenizer; normalised. */
function checkWorkerUrls(c: GatewayConfig): string[] {
  const urls = c.workerUrls.map((u) => normalizeWorkerUrl(u));
  const seen = new Set<string>();
  for (const u of urls) {
    if (seen.has(u)) throw badValue("--worker-urls", u, "each worker URL may appear once");
    seen.add(u);
  }
  const grpcUrl = urls.find(isGrpcUrl);
  if (grpcUrl && c.tokenizerPath === null && c.modelPath === null) {
    throw badValue("--worker-urls", grpcUrl, GRPC_NEEDS_TOKENIZER);
  }
  return urls;
}

/** SMG's checks of the policy flags that depend on other flags. */
function checkPolicies(c: GatewayConfig): void {
  if (c.cacheAware.cacheIndex === "hash" && c.cacheBoundaries.length === 0) {
    throw badValue("--cache-index", "hash", "cache_index=hash requires non-empty cache_boundaries");
  }
  if (c.policy === "cache_aware") atLeast(1)("--eviction-interval", c.evictionIntervalSecs);
  // SMG refuses power_of_two with fewer than 2 workers; with none at start (all added through
  // POST /workers) there is nothing to refuse yet.
  if (c.policy === "power_of_two" && c.workerUrls.length === 1) {
    throw badValue("--policy", "power_of_two", "Power-of-two policy requires at least 2 workers");
  }
}

/** PD: legs only with `--pd-disaggregation`, never mixed with regular workers, no decode bucket. */
function checkPd(c: GatewayConfig): PdConfig {
  const pd = c.pd;
  if (!pd.enabled) {
    if (pd.prefill.length > 0 || pd.decode.length > 0) {
      throw badValue(
        "--prefill/--decode",
        "",
        "prefill and decode workers need --pd-disaggregation",
      );
    }
    return pd;
  }
  if (c.workerUrls.length > 0) {
    throw badValue(
      "--worker-urls",
      c.workerUrls.join(" "),
      "use --prefill and --decode with --pd-disaggregation",
    );
  }
  const prefill = pd.prefill.map((p) => ({ ...p, url: normalizeWorkerUrl(p.url, "--prefill") }));
  const decode = pd.decode.map((u) => normalizeWorkerUrl(u, "--decode"));
  const all = [...prefill.map((p) => p.url), ...decode];
  const grpcLegs = all.filter(isGrpcUrl);
  if (grpcLegs.length > 0 && grpcLegs.length < all.length) {
    throw badValue(
      "--prefill/--decode",
      all.join(" "),
      "a PD fleet speaks one protocol: all grpc:// or all http(s)://",
    );
  }
  if (grpcLegs.length > 0 && c.tokenizerPath === null && c.modelPath === null) {
    throw badValue("--prefill/--decode", grpcLegs[0], GRPC_NEEDS_TOKENIZER);
  }
  if (new Set(all).size !== all.length) {
    throw badValue("--prefill/--decode", all.join(" "), "each worker URL may appear once");
  }
  if (pd.decodePolicy === "bucket") {
    throw badValue(
      "--decode-policy",
      "bucket",
      "Decode policy should not be allowed to be bucket; bucket routes the prefill leg (--prefill-policy bucket)",
    );
  }
  if (pd.prefillPolicy === "power_of_two" && prefill.length === 1) {
    throw badValue(
      "--prefill-policy",
      "power_of_two",
      "Power-of-two policy for prefill requires at least 2 prefill workers",
    );
  }
  if (pd.decodePolicy === "power_of_two" && decode.length === 1) {
    throw badValue(
      "--decode-policy",
      "power_of_two",
      "Power-of-two policy for decode requires at least 2 decode workers",
    );
  }
  return { ...pd, prefill, decode };
}

/**
 * The mesh (only when on): SMG's rule that the advertised address is never unspecified, with
 * SMG's message, mTLS paths all or none, and timing that makes sense together.
 */
function checkMesh(c: GatewayConfig): void {
  const m = c.mesh;
  if (!m.enabled) return;
  const advertise = m.advertiseHost ?? m.host;
  if (isUnspecified(advertise)) {
    throw new ConfigError(
      `--mesh-advertise-host: mesh advertise address cannot be unspecified ('${advertise}'); ` +
        "set --mesh-advertise-host to a routable node IP",
    );
  }
  if (!parseHostPort(`${advertise}:${m.port}`)) {
    throw badValue("--mesh-advertise-host", advertise, "expected an IP address or a host name");
  }
  const tls = [m.tlsCaCert, m.tlsCert, m.tlsKey];
  if (tls.some((x) => x !== null) && tls.some((x) => x === null)) {
    throw new ConfigError(
      "--mesh-tls-ca-cert, --mesh-tls-cert and --mesh-tls-key: give all three for mTLS, or none",
    );
  }
  if (m.probeTimeoutMs >= m.probeIntervalMs) {
    throw badValue(
      "--mesh-probe-timeout-ms",
      m.probeTimeoutMs,
      "must be below --mesh-probe-interval-ms",
    );
  }
  if (!(m.streamIdleTimeoutSecs > m.heartbeatSecs)) {
    throw badValue(
      "--mesh-stream-idle-timeout-secs",
      m.streamIdleTimeoutSecs,
      "must be above --mesh-heartbeat-secs",
    );
  }
}

/** TLS: a certificate and its key come together, on the main port and toward workers. */
function checkTls(c: GatewayConfig): void {
  const pairs = [
    ["--tls-cert-path", c.tls.certPath, "--tls-key-path", c.tls.keyPath],
    ["--client-cert-path", c.tls.clientCertPath, "--client-key-path", c.tls.clientKeyPath],
  ] as const;
  for (const [certFlag, cert, keyFlag, key] of pairs) {
    if (cert !== null && key === null) {
      throw new ConfigError(`${keyFlag}: required with ${certFlag} ('${cert}')`);
    }
    if (key !== null && cert === null) {
      throw new ConfigError(`${certFlag}: required with ${keyFlag} ('${key}')`);
    }
  }
  for (const p of c.tls.caCertPaths) nonEmpty("--ca-cert-paths", p);
}

const empty = (s: Record<string, string>) => Object.keys(s).length === 0;
const shown = (s: Record<string, string>) =>
  Object.entries(s).map(([k, v]) => `${k}=${v}`).join(" ");

/**
 * Discovery: a selector for what is discovered (worker pods, or both PD legs), none without
 * `--service-discovery`, and `--router-selector` only with the mesh on.
 */
function checkDiscovery(c: GatewayConfig): void {
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
