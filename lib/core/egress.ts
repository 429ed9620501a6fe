/**
 * The egress allow-list: which hosts a worker may be registered at. Every registration path
 * (start-up flags, `POST /workers`, Kubernetes discovery, workers imported from mesh peers)
 * asks `EgressPolicy.refusal` with the worker's URL and the endpoints its labels name (KV-event
 * ZeroMQ endpoints); a refusal is a sentence that says why.
 *
 * Always refused, with or without `--worker-host-allowlist`: link-local addresses
 * (169.254.0.0/16, fe80::/10, cloud metadata at 169.254.169.254 among them), AWS's IPv6
 * metadata address, and this gateway's own listen ports (main, metrics, mesh) on this host.
 * With the flag, a host must also match an entry: an IP address or CIDR block (IPv4 or IPv6)
 * admits IP literals in it; a name (`worker-0.example`) or a `*.suffix` admits that name (and,
 * for `*.suffix`, the suffix and every name under it, as Deno's `--allow-net` reads it).
 *
 * Names are checked as names, never resolved: an address looked up at registration says
 * nothing of the address the connection will look up later (DNS rebinding), so a CIDR entry
 * never admits a name. What stops a name that resolves into link-local at connect time is the
 * runtime's `--deny-net=169.254.0.0/16`, which Deno checks against the resolved address.
 */

import {
  type Cidr,
  cidrContains,
  formatIp,
  inAny,
  LINK_LOCAL,
  METADATA,
  parseCidr,
  parseIp,
  THIS_HOST,
} from "./ip.ts";
import { parseHostPort } from "./host_port.ts";

/** One `--worker-host-allowlist` entry. */
export type AllowEntry =
  /** An IP address (a /32 or /128) or a CIDR block. */
  | { kind: "cidr"; cidr: Cidr; text: string }
  /** A host name, lower-case, without a trailing dot. */
  | { kind: "name"; name: string; text: string }
  /** `*.suffix`: the suffix itself and every name under it. */
  | { kind: "suffix"; suffix: string; text: string };

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

function normName(s: string): string {
  return s.trim().toLowerCase().replace(/\.$/, "");
}

function isName(s: string): boolean {
  return s.length <= 253 && s.split(".").every((l) => LABEL.test(l));
}

/** Parses one allow-list entry; null when it is none of an IP, a CIDR, a name or `*.suffix`. */
export function parseAllowEntry(raw: string): AllowEntry | null {
  const s = raw.trim();
  const cidr = parseCidr(s);
  if (cidr) return { kind: "cidr", cidr, text: cidr.text.replace(/\/(32|128)$/, "") };
  const name = normName(s);
  if (name.startsWith("*.")) {
    const suffix = name.slice(2);
    return isName(suffix) && suffix.includes(".") ? { kind: "suffix", suffix, text: name } : null;
  }
  // A dotted string of digits that is not an IPv4 address is a typo, not a host name.
  if (/^[\d.]+$/.test(name) || name.includes("/")) return null;
  return isName(name) ? { kind: "name", name, text: name } : null;
}

/** A host to check: an IP address, or a name. */
type Host = { ip: NonNullable<ReturnType<typeof parseIp>>; text: string } | {
  ip: null;
  text: string;
};

function hostOf(raw: string): Host {
  const ip = parseIp(raw);
  return ip ? { ip, text: formatIp(ip) } : { ip: null, text: normName(raw) };
}

/** `localhost` and the names under it (RFC 6761) are this host. */
const isLocalName = (n: string) => n === "localhost" || n.endsWith(".localhost");

/** A socket this gateway listens on. */
export interface OwnEndpoint {
  /** What listens there: `main`, `metrics` or `mesh`. */
  role: string;
  /** The listen address (`0.0.0.0` for every address). */
  host: string;
  /** The port; 0 (not bound yet) matches nothing. */
  port: number;
}

/** What an `EgressPolicy` is built from. */
export interface EgressOptions {
  /** `--worker-host-allowlist` entries as given (already checked); empty: no allow-list. */
  allowlist: readonly string[];
  /** The gateway's listen sockets. */
  own: readonly OwnEndpoint[];
  /**
   * This host's interface addresses (default: `Deno.networkInterfaces()` where
   * `--allow-sys=networkInterfaces` permits it, else none: loopback and the listen addresses
   * are still known).
   */
  localAddresses?: () => string[];
}

function systemAddresses(): string[] {
  try {
    return Deno.networkInterfaces().map((i) => i.address);
  } catch {
    return [];
  }
}

/** Thrown by a registration that the egress policy refuses; the message says why. */
export class EgressRefusedError extends Error {
  /** Names the host and the rule. */
  constructor(message: string) {
    super(message);
    this.name = "EgressRefusedError";
  }
}

/** The worker URL's host and port as the connection will use them (WHATWG host parsing). */
export function urlHostPort(url: string): { host: string; port: number } | null {
  let u: URL;
  try {
    u = new URL(url);
    // grpc:// hosts are opaque to the URL parser; parsed as http, `0x7f.1` becomes 127.0.0.1.
    const h = new URL(`http://${u.host}`);
    const port = Number(u.port || h.port || (u.protocol.startsWith("https") ? 443 : 80));
    return { host: h.hostname, port };
  } catch {
    return null;
  }
}

/** Decides which worker hosts the gateway may register. */
export class EgressPolicy {
  readonly #allow: AllowEntry[];
  #own: OwnEndpoint[];
  readonly #local: () => string[];
  #localCache: Host[] | null = null;

  /** A policy over `opts.allowlist` (entries already validated at start). */
  constructor(opts: EgressOptions) {
    this.#allow = opts.allowlist.map((e) => parseAllowEntry(e)).filter((e) => e !== null);
    this.#own = [...opts.own];
    this.#local = opts.localAddresses ?? systemAddresses;
  }

  /** Whether an allow-list was given. */
  get restricted(): boolean {
    return this.#allow.length > 0;
  }

  /** Replaces the listen sockets (once bound: port 0 becomes the real port). */
  setOwn(own: readonly OwnEndpoint[]): void {
    this.#own = [...own];
  }

  /** Why `host:port` may not be a worker, or null when it may. */
  refusalOf(rawHost: string, port: number): string | null {
    const h = hostOf(rawHost);
    const shown = h.ip && !h.ip.v4 ? `[${h.text}]:${port}` : `${h.text}:${port}`;
    if (h.ip && inAny(LINK_LOCAL, h.ip)) {
      return `${shown} is link-local (169.254.0.0/16, fe80::/10), where cloud metadata answers; ` +
        "workers are never registered there";
    }
    if (h.ip && inAny(METADATA, h.ip)) return `${shown} is a cloud metadata address`;
    const own = this.#own.find((o) => o.port === port && this.#isThisHost(h, o));
    if (own) return `${shown} is this gateway's own ${own.role} port`;
    if (this.#allow.length === 0 || this.#allow.some((e) => matches(e, h))) return null;
    const list = this.#allow.map((e) => e.text).join(", ");
    return `${shown} is not in --worker-host-allowlist (${list})` +
      (h.ip ? "" : "; a host name must be listed by name (names are not resolved for the check)");
  }

  /** Why the worker at `url` (with `labels` naming more endpoints) may not be registered. */
  refusal(url: string, labels: Record<string, string> = {}): string | null {
    const hp = urlHostPort(url);
    if (hp) {
      const r = this.refusalOf(hp.host, hp.port);
      if (r) return r;
    }
    for (const key of ["kv_events", "kv_events_replay"]) {
      const m = /^tcp:\/\/(.+)$/.exec(labels[key]?.trim() ?? "");
      const ep = m ? parseHostPort(m[1]) : null;
      const r = ep ? this.refusalOf(ep.host, ep.port) : null;
      if (r) return `label ${key}: ${r}`;
    }
    return null;
  }

  /** Throws `EgressRefusedError` when `refusal` says no. */
  check(url: string, labels?: Record<string, string>): void {
    const r = this.refusal(url, labels);
    if (r) throw new EgressRefusedError(`worker ${url} refused: ${r}`);
  }

  #isThisHost(h: Host, own: OwnEndpoint): boolean {
    if (h.ip === null) return isLocalName(h.text) || h.text === normName(own.host);
    if (inAny(THIS_HOST, h.ip)) return true;
    const listen = parseIp(own.host);
    if (listen && formatIp(listen) === h.text) return true;
    this.#localCache ??= this.#local().map(hostOf);
    return this.#localCache.some((l) => l.text === h.text);
  }
}

function matches(e: AllowEntry, h: Host): boolean {
  if (e.kind === "cidr") return h.ip !== null && cidrContains(e.cidr, h.ip);
  if (h.ip !== null) return false;
  if (e.kind === "name") return h.text === e.name;
  return h.text === e.suffix || h.text.endsWith(`.${e.suffix}`);
}

/**
 * Whether this process's runtime grant (`--allow-net`, or the narrowed grant of the worker
 * thread the gateway runs in) lets it connect to the worker at `url`. Deno refuses the rest
 * with `NotCapable` whatever the allow-list says.
 */
export function runtimeReaches(url: string): boolean {
  const hp = urlHostPort(url);
  if (!hp) return false;
  const host = hp.host.includes(":") && !hp.host.startsWith("[") ? `[${hp.host}]` : hp.host;
  try {
    return Deno.permissions.querySync({ name: "net", host: `${host}:${hp.port}` }).state ===
      "granted";
  } catch {
    return false;
  }
}
