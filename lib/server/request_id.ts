/**
 * Request ids: the first client-supplied one from the configured headers, else a new one with
 * SMG's per-endpoint prefix and 24 random alphanumerics.
 */

import type { HeaderMap } from "../core/http.ts";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const PREFIX: Record<string, string> = {
  "/v1/chat/completions": "chatcmpl-",
  "/v1/completions": "cmpl-",
  "/generate": "gnt-",
};
const MAX_ID_LENGTH = 256;

// Random bytes are drawn in batches: one getRandomValues call per 256 ids.
const pool = new Uint8Array(24 * 256);
let offset = pool.length;

/** A fresh id for `path`. */
export function newRequestId(path: string): string {
  if (offset + 24 > pool.length) {
    crypto.getRandomValues(pool);
    offset = 0;
  }
  let id = PREFIX[path] ?? "req-";
  for (let i = 0; i < 24; i++) id += ALPHABET[pool[offset + i] % 62];
  offset += 24;
  return id;
}

/** The client's id from `headers` (first present, ≤ 256 chars), else a fresh one. */
export function requestIdFor(headers: HeaderMap, names: readonly string[], path: string): string {
  for (const n of names) {
    const v = headers.get(n);
    if (v && v.length <= MAX_ID_LENGTH) return v;
  }
  return newRequestId(path);
}
