/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` a client sends is
 * read (version 00 and any later version's first four fields; an all-zero id, upper-case hex or a
 * malformed value is ignored, as the spec says: the gateway then starts a trace of its own), and
 * the one sent to a worker is written; `tracestate` is passed on as it came when it is well
 * formed (at most 32 members, 512 characters). Ids are lower-case hex strings, drawn from a pool
 * of random bytes refilled 256 ids at a time.
 */

/** A span's place in a trace, as `traceparent` carries it. */
export interface SpanContext {
  /** 32 lower-case hex digits, not all zero. */
  readonly traceId: string;
  /** 16 lower-case hex digits, not all zero. */
  readonly spanId: string;
  /** Whether the trace is sampled (flag 01). */
  readonly sampled: boolean;
  /** The `tracestate` that came with it, or null. */
  readonly traceState: string | null;
}

/** Each byte's two hex digits. */
const HEX2 = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
const MAX_STATE_CHARS = 512;
const MAX_STATE_MEMBERS = 32;

/** The span context a client's `traceparent` (and `tracestate`) names, or null when unusable. */
export function parseTraceparent(
  header: string | null,
  state: string | null,
): SpanContext | null {
  if (header === null) return null;
  const m = TRACEPARENT.exec(header.trim());
  if (m === null) return null;
  const [, version, traceId, spanId, flags, rest] = m;
  // Version ff is invalid; version 00 has exactly four fields; later versions may add more.
  if (version === "ff" || (version === "00" && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  return {
    traceId,
    spanId,
    sampled: (parseInt(flags, 16) & 1) === 1,
    traceState: wellFormedState(state),
  };
}

/** `tracestate` if it can be passed on (members within bounds), else null. */
function wellFormedState(state: string | null): string | null {
  if (state === null) return null;
  const s = state.trim();
  if (s.length === 0 || s.length > MAX_STATE_CHARS) return null;
  let members = 0;
  for (const part of s.split(",")) {
    const p = part.trim();
    if (p.length === 0) continue;
    const eq = p.indexOf("=");
    if (eq <= 0 || eq === p.length - 1) return null;
    if (++members > MAX_STATE_MEMBERS) return null;
  }
  return members === 0 ? null : s;
}

/** The `traceparent` header of a span: version 00, its ids, sampled or not. */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`;
}

// Random bytes for ids, refilled in one getRandomValues call per 256 span ids.
const pool = new Uint8Array(8 * 256);
let offset = pool.length;

/** `bytes` random bytes as lower-case hex (never all zero). */
function randomHex(bytes: number): string {
  for (;;) {
    if (offset + bytes > pool.length) {
      crypto.getRandomValues(pool);
      offset = 0;
    }
    let s = "";
    let any = 0;
    for (let i = 0; i < bytes; i++) {
      const b = pool[offset + i];
      any |= b;
      s += HEX2[b];
    }
    offset += bytes;
    if (any !== 0) return s;
  }
}

/** A new trace id: 16 random bytes. */
export const newTraceId = (): string => randomHex(16);

/** A new span id: 8 random bytes. */
export const newSpanId = (): string => randomHex(8);
