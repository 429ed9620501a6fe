/**
 * The own front's limits on its clients, as `server.ts` applies them: the options (each 0 turns
 * its limit off, the default), the reasons a connection is refused or cut, the per-address count
 * of open connections, and the timing rules the idle sweep checks. Pure arithmetic over numbers
 * the connections keep; no I/O and no timers here, so no cost per byte or per read.
 *
 * What a client gets: over a connection cap, its new connection is closed at once, before any
 * byte is read or written (a load balancer sees a failed connect and may try another gateway; an
 * HTTP client sees its request unanswered on a fresh connection, which it may safely resend).
 * A head not complete in time: a plain-text 408 with `connection: close`. A body too slow: the
 * gateway's 408 `request_body_timeout` error, then the connection closes.
 *
 * Known gaps: addresses are counted one by one, so an IPv6 client holding a whole /64 counts as
 * many clients; over HTTPS the caps apply once the TLS handshake is done (handshakes have their
 * own 10 s bound, `tls_listener.ts`). Deadlines are checked by the sweep, so one is enforced up
 * to one sweep interval (at most 1 s, a quarter of the shortest deadline) late.
 */

import { GatewayError } from "../core/errors.ts";

/** The front's limits on its clients; every field defaults to 0, no limit. */
export interface FrontLimits {
  /** Open client connections at most; one more is closed at once (default 0: no cap). */
  maxConnections?: number;
  /** Open connections from one client address at most; one more is closed at once (default 0). */
  maxConnectionsPerClient?: number;
  /**
   * Time a request head may take (ms), from accept for a connection's first request and from
   * the head's first byte for the next ones; then 408 and close (default 0: none). The wait for
   * the first byte of a next request stays the idle timeout's.
   */
  headTimeoutMs?: number;
  /**
   * Time a request body may take once the gateway starts reading it (ms), plus one second per
   * `bodyMinRate` body bytes received; then 408 and close (default 0: none).
   */
  bodyTimeoutMs?: number;
  /** Body bytes per second that extend `bodyTimeoutMs` (default 0: a flat deadline). */
  bodyMinRate?: number;
}

/** Why the front refused a connection or cut a request (the `reason` label of the counter). */
export type RejectReason = "max_connections" | "per_client" | "head_timeout" | "body_timeout";

/** Every `RejectReason`, in the order they are met. */
export const REJECT_REASONS: readonly RejectReason[] = [
  "max_connections",
  "per_client",
  "head_timeout",
  "body_timeout",
];

/**
 * Whether a body read since `since` is overdue at `now`, having brought `bytes`: its deadline is
 * `timeoutMs`, moved one second later per `minRate` bytes (Apache's mod_reqtimeout `MinRate`), so
 * a large body sent steadily is never cut while a trickle is.
 */
export function bodyOverdue(
  now: number,
  since: number,
  bytes: number,
  timeoutMs: number,
  minRate: number,
): boolean {
  const earned = minRate > 0 ? (bytes * 1000) / minRate : 0;
  return now - since > timeoutMs + earned;
}

/**
 * The idle sweep's interval (ms): a quarter of the shortest deadline in force, between 10 ms and
 * 1 s, so a deadline is enforced at most that late.
 */
export function sweepInterval(idleMs: number, headMs: number, bodyMs: number): number {
  let shortest = idleMs;
  if (headMs > 0) shortest = Math.min(shortest, headMs);
  if (bodyMs > 0) shortest = Math.min(shortest, bodyMs);
  return Math.max(10, Math.min(1000, shortest / 4));
}

/** The error a too-slow request body raises (the handler answers it; then the connection closes). */
export function bodyTimeoutError(bytes: number, ms: number): GatewayError {
  return new GatewayError(
    408,
    "request_body_timeout",
    `the request body arrived too slowly: ${bytes} bytes in ${Math.round(ms / 1000)} s`,
  );
}

/** Open connections per client address, under a cap. */
export class ClientCounts {
  readonly #max: number;
  readonly #open = new Map<string, number>();

  /** At most `max` per address (0: no cap, nothing counted). */
  constructor(max: number) {
    this.#max = max;
  }

  /** Counts a connection from `addr`; false (not counted) when `addr` is at the cap. */
  take(addr: string | undefined): boolean {
    if (this.#max <= 0 || addr === undefined) return true;
    const n = this.#open.get(addr) ?? 0;
    if (n >= this.#max) return false;
    this.#open.set(addr, n + 1);
    return true;
  }

  /** A connection counted by `take(addr)` closed. */
  give(addr: string | undefined): void {
    if (this.#max <= 0 || addr === undefined) return;
    const n = this.#open.get(addr) ?? 0;
    if (n <= 1) this.#open.delete(addr);
    else this.#open.set(addr, n - 1);
  }

  /** Connections counted from `addr`. */
  open(addr: string): number {
    return this.#open.get(addr) ?? 0;
  }

  /** Addresses with a connection counted. */
  get addresses(): number {
    return this.#open.size;
  }
}
