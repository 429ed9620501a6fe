/**
 * The request model of the framing fuzzer: a request with every part raw (request line, header
 * lines, line ends, body), built valid (`baseRequest`) and rendered byte for byte (`render`), so
 * the mutations (`http_mutations.ts`) can bend any part. Every inference request carries a tag,
 * `fz<input>k<request>c<check>`, as its `x-request-id` and in its body, so a request that reaches
 * the worker can be traced to the connection that sent it (`tagOf`); the check digits make a
 * mutated tag unreadable rather than misleading.
 */

import type { Random } from "../../lib/core/clock.ts";
import { concatBytes, weighted } from "./mutate.ts";

const enc = new TextEncoder();

/** The front's head limit in the fuzz gateway's config (its default). */
export const MAX_HEAD = 64 * 1024;

/** The tag of request `k` of input `index`. */
export function tag(index: number, k: number): string {
  return `fz${index}k${k}c${(index * 31 + k * 7) % 97}`;
}

/** The input index a tag names, or -1 when `s` holds no intact tag. */
export function tagOf(s: string): number {
  const m = /fz(\d{1,9})k(\d{1,3})c(\d{1,2})/.exec(s);
  if (!m) return -1;
  const [i, k, c] = [Number(m[1]), Number(m[2]), Number(m[3])];
  return (i * 31 + k * 7) % 97 === c ? i : -1;
}

/** A request before rendering: every part raw, so any of them can be bent. */
export interface Req {
  method: string;
  target: string;
  version: string;
  /** Separators of the request line. */
  sp: [string, string];
  headers: [string, string][];
  /** Line end of every line. */
  eol: string;
  body: Uint8Array;
  /** Names of the mutations applied. */
  muts: string[];
}

/** A valid JSON body for `path`, carrying the tag `t`; `stream` asks for an event stream. */
export function jsonBody(path: string, t: string, stream = false): string {
  if (path === "/v1/chat/completions") {
    return JSON.stringify({
      model: "fuzz-model",
      messages: [{ role: "user", content: t }],
      stream,
    });
  }
  if (path === "/v1/completions") return JSON.stringify({ model: "fuzz-model", prompt: t, stream });
  return JSON.stringify({ text: t, sampling_params: { max_new_tokens: 1 }, stream });
}

/** A valid request: mostly inference POSTs, some GETs of other routes. */
export function baseRequest(r: Random, index: number, k: number): Req {
  const t = tag(index, k);
  const kind = weighted(
    r,
    [
      [6, "/generate"],
      [2, "/v1/completions"],
      [2, "/v1/chat/completions"],
      [1, "GET /health"],
      [1, "GET /v1/models"],
      [1, "GET /readiness"],
      [1, "GET /nowhere"],
      [1, "DELETE /generate"],
    ] as const,
  );
  const headers: [string, string][] = [["Host", "127.0.0.1"]];
  if (kind.startsWith("GET ") || kind.startsWith("DELETE ")) {
    const [method, target] = kind.split(" ");
    headers.push(["X-Request-Id", t]);
    return {
      method,
      target,
      version: "HTTP/1.1",
      sp: [" ", " "],
      headers,
      eol: "\r\n",
      body: new Uint8Array(),
      muts: [],
    };
  }
  // Some answers are streams: chunked (close-delimited for HTTP/1.0) among sized ones.
  const body = enc.encode(jsonBody(kind, t, r() < 0.2));
  headers.push(["Content-Type", "application/json"], ["X-Request-Id", t]);
  headers.push(["Content-Length", String(body.length)]);
  return {
    method: "POST",
    target: kind,
    version: "HTTP/1.1",
    sp: [" ", " "],
    headers,
    eol: "\r\n",
    body,
    muts: [],
  };
}

/** Sets header `name` to `value` (null: removes it), whatever case it was sent in. */
export function setHeader(q: Req, name: string, value: string | null): void {
  const lower = name.toLowerCase();
  q.headers = q.headers.filter(([n]) => n.toLowerCase() !== lower);
  if (value !== null) q.headers.push([name, value]);
}

/** The request's bytes. */
export function render(q: Req): Uint8Array {
  let head = `${q.method}${q.sp[0]}${q.target}${q.sp[1]}${q.version}${q.eol}`;
  for (const [n, v] of q.headers) head += `${n}: ${v}${q.eol}`;
  head += q.eol;
  // Latin-1: one byte per character (non-Latin-1 characters keep their low byte).
  const bytes = new Uint8Array(head.length);
  for (let i = 0; i < head.length; i++) bytes[i] = head.charCodeAt(i) & 0xff;
  return concatBytes(bytes, q.body);
}
