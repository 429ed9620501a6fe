/**
 * The framing fuzzer's mutations of one request (`http_request.ts`), by the RFC 9112 rule each
 * bends: the request line, header syntax, obs-fold, bare CR and LF, `Host`, duplicate and
 * conflicting `Content-Length`, `Transfer-Encoding` and its chunk sizes, extensions and
 * trailers, CL with TE, oversized heads, HTTP/1.0; and the classic smuggling shapes (CL.TE,
 * TE.CL, TE.TE) with a second request hidden in the body.
 */

import type { Random } from "../../lib/core/clock.ts";
import { jsonBody, MAX_HEAD, type Req, setHeader, tag } from "./http_request.ts";
import { chance, concatBytes, int, pick } from "./mutate.ts";

const enc = new TextEncoder();

/** The body as chunks of random sizes, with a size line `sizeLine(n)` per chunk. */
function chunked(
  r: Random,
  body: Uint8Array,
  sizeLine = (n: number) => n.toString(16),
  trailer = "",
): Uint8Array {
  const parts: Uint8Array[] = [];
  for (let at = 0; at < body.length;) {
    const n = Math.min(body.length - at, int(r, 1, 40));
    parts.push(enc.encode(`${sizeLine(n)}\r\n`), body.subarray(at, at + n), enc.encode("\r\n"));
    at += n;
  }
  parts.push(enc.encode(`0\r\n${trailer}\r\n`));
  return concatBytes(...parts);
}

/** A second, complete request hidden in a body: the smuggler's payload. */
function hidden(index: number): Uint8Array {
  const t = tag(index, 9);
  const b = jsonBody("/generate", t);
  return enc.encode(
    `POST /generate HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${t}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${b.length}\r\n\r\n${b}`,
  );
}

/** A mutation of request `q` of input `index`. */
export type Mutation = (r: Random, q: Req, index: number) => void;

/** The mutations, by the rule each one tests. */
export const MUTATIONS: Record<string, Mutation> = {
  "method-lower": (_r, q) => void (q.method = q.method.toLowerCase()),
  "method-bad": (r, q) =>
    void (q.method = pick(r, ["G ET", "GE\0T", "", "GET\t", "\x80GET", "@", "M".repeat(3000)])),
  "target": (r, q) =>
    void (q.target = pick(r, [
      `http://127.0.0.1${q.target}`,
      `http://[${q.target}`,
      `http://[::1${q.target}`,
      `http://a:b@c${q.target}`,
      `https://${q.target}`,
      `${q.target}?x=%zz&y=\u00e9`,
      `${q.target}#frag`,
      `/${q.target}`,
      q.target.slice(1),
      "*",
      "",
      "127.0.0.1:80",
      `${q.target}\x01`,
      `${q.target}/%2e%2e/`,
      `/workers/%E0%A4%A`,
      `/workers/${"%ff".repeat(3)}`,
    ])),
  "target-long": (_r, q) => void (q.target = `/${"a".repeat(MAX_HEAD + 10)}`),
  "version": (r, q) =>
    void (q.version = pick(r, [
      "HTTP/1.0",
      "HTTP/2.0",
      "HTTP/1.2",
      "http/1.1",
      "HTTP/1.1 ",
      "HTTP/1",
      "HTTP/0.9",
      "",
      "HTTP/1.1\0",
    ])),
  "line-spaces": (r, q) => void (q.sp = [pick(r, ["  ", "\t", " \t"]), pick(r, [" ", "  ", "\t"])]),
  "leading-crlf": (r, q) => void (q.method = "\r\n".repeat(int(r, 1, 3)) + q.method),
  "name-space": (r, q) => void (q.headers[int(r, 0, q.headers.length - 1)][0] += " "),
  "name-bad": (r, q) =>
    void q.headers.splice(int(r, 0, q.headers.length), 0, [
      pick(r, ["x y", "x\0", "(x)", "", "é", "x\tz"]),
      "1",
    ]),
  "no-colon": (r, q) =>
    void q.headers.splice(int(r, 0, q.headers.length), 0, ["garbage line", "\0"]),
  "value-ctl": (r, q) =>
    void q.headers.push(["X-Ctl", `a${pick(r, ["\0", "\x01", "\x7f", "\r", "\x1b"])}b`]),
  "value-high": (_r, q) => void q.headers.push(["X-High", "caf\u00e9 \u00ff"]),
  "obs-fold": (r, q) => {
    const i = int(r, 0, q.headers.length - 1);
    q.headers[i][1] += `${q.eol}${pick(r, [" ", "\t"])}folded`;
  },
  "host-dup": (_r, q) => void q.headers.push(["Host", "other"]),
  "host-none": (_r, q) => setHeader(q, "Host", null),
  "host-bad": (r, q) => setHeader(q, "Host", pick(r, ["a b", "[::1", "x:99999999", "é", ""])),
  "header-huge": (_r, q) => void q.headers.push(["X-Big", "b".repeat(MAX_HEAD)]),
  "headers-many": (r, q) => {
    for (let i = int(r, 100, 1500); i > 0; i--) q.headers.push([`X-H${i}`, "v"]);
  },
  "eol-lf": (_r, q) => void (q.eol = "\n"),
  "eol-cr": (r, q) => {
    const i = int(r, 0, q.headers.length - 1);
    q.headers[i][1] += "\rX-Injected: 1";
  },
  "expect-continue": (_r, q) => void q.headers.push(["Expect", "100-continue"]),
  "connection": (r, q) =>
    setHeader(
      q,
      "Connection",
      pick(r, ["close", "keep-alive", "close, keep-alive", "upgrade", "Keep-Alive", ""]),
    ),
  "http10": (r, q) => {
    q.version = "HTTP/1.0";
    if (chance(r, 0.5)) q.headers.push(["Connection", "keep-alive"]);
  },
  "cl-bent": (r, q) => {
    const n = q.body.length;
    setHeader(
      q,
      "Content-Length",
      pick(r, [
        `${n}, ${n}`,
        `${n}, ${n + 1}`,
        `-${n}`,
        `+${n}`,
        `0x${n.toString(16)}`,
        `000${n}`,
        "99999999999999999999",
        "1".repeat(16),
        `${n} ${n}`,
        "",
        ` ${n} `,
        `${n + int(r, 1, 30)}`,
        `${Math.max(0, n - int(r, 1, n))}`,
        `${70 * 1024}`,
      ]),
    );
  },
  "cl-dup": (r, q) => {
    const n = q.body.length;
    q.headers.push(["Content-Length", String(chance(r, 0.5) ? n : n + 1)]);
  },
  "te": (r, q) => {
    const coding = pick(r, [
      "chunked",
      "Chunked",
      "chunked, chunked",
      "gzip, chunked",
      "chunked, gzip",
      "identity",
      " chunked ",
      "chunked\x0b",
      "",
      "xchunked",
    ]);
    const keepCl = chance(r, 0.3);
    if (!keepCl) setHeader(q, "Content-Length", null);
    q.headers.push(["Transfer-Encoding", coding]);
    if (chance(r, 0.1)) q.headers.push(["Transfer-Encoding", "chunked"]);
    q.body = chunked(r, q.body);
  },
  "chunk-sizes": (r, q) => {
    setHeader(q, "Content-Length", null);
    q.headers.push(["Transfer-Encoding", "chunked"]);
    const bend = pick(r, [
      (n: number) => n.toString(16).toUpperCase(),
      (n: number) => `000${n.toString(16)}`,
      (n: number) => `${n.toString(16)};ext=1;b="q"`,
      (n: number) => `${n.toString(16)} ;x`,
      (n: number) => `${n.toString(16)}; a b \0`,
      (n: number) => `0x${n.toString(16)}`,
      (n: number) => `-${n.toString(16)}`,
      (_n: number) => "fffffffffffffffff",
      (n: number) => (n + 1).toString(16),
      (n: number) => Math.max(0, n - 1).toString(16),
      (n: number) => `${n.toString(16)};${"e".repeat(5000)}`,
      (n: number) => `${n.toString(16)}\r`,
    ]);
    const trailer = pick(r, ["", "", "X-T: 1\r\n", "bad trailer\r\n", "X: \0\r\n"]);
    q.body = chunked(r, q.body, bend, trailer);
  },
  "chunk-framing": (r, q) => {
    setHeader(q, "Content-Length", null);
    q.headers.push(["Transfer-Encoding", "chunked"]);
    const b = new TextDecoder().decode(chunked(r, q.body));
    const bent = pick(r, [
      () => b.replaceAll("\r\n", "\n"),
      () => b.replace("\r\n", "\r\r\n"),
      () => b.slice(0, b.length - 2),
      () => b.slice(0, b.length - 5),
      () => b.replace(/\r\n0\r\n\r\n$/, "\r\n000\r\n\r\n"),
      () => b.replace(/0\r\n\r\n$/, "0\r\nX-T: 1\r\n\r\n"),
      () => b.replace("\r\n", "\r\nEXTRA"),
      () => b.replace(/\r\n/g, (m) => (chance(r, 0.2) ? "\n" : m)),
    ])();
    q.body = enc.encode(bent);
  },
  "te-http10": (r, q) => {
    q.version = "HTTP/1.0";
    setHeader(q, "Content-Length", null);
    q.headers.push(["Transfer-Encoding", "chunked"]);
    q.body = chunked(r, q.body);
  },
};

/** The classic smuggling shapes: the front must refuse or frame them one way only. */
export const SMUGGLES: Record<string, Mutation> = {
  "cl.te": (_r, q, index) => {
    const body = concatBytes(enc.encode("0\r\n\r\n"), hidden(index));
    q.headers.push(["Transfer-Encoding", "chunked"]);
    setHeader(q, "Content-Length", String(body.length));
    q.body = body;
  },
  "te.cl": (_r, q, index) => {
    const h = hidden(index);
    q.body = concatBytes(
      enc.encode(`${h.length.toString(16)}\r\n`),
      h,
      enc.encode("\r\n0\r\n\r\n"),
    );
    setHeader(q, "Content-Length", "4");
    q.headers.push(["Transfer-Encoding", "chunked"]);
  },
  "te.te": (r, q, index) => {
    const h = hidden(index);
    q.body = concatBytes(enc.encode("0\r\n\r\n"), h);
    setHeader(q, "Content-Length", String(q.body.length));
    const obfuscated = pick(r, [
      ["Transfer-Encoding", "xchunked"],
      ["Transfer-Encoding ", "chunked"],
      ["Transfer-Encoding", "\tchunked"],
      ["X", `x${q.eol} Transfer-Encoding: chunked`],
      ["Transfer-Encoding", "chunked, identity"],
      ["Transfer_Encoding", "chunked"],
    ] as [string, string][]);
    q.headers.push(obfuscated);
  },
  "cl-short": (_r, q, index) => {
    // The length covers the JSON only; the hidden request follows as if pipelined. Not
    // smuggling by itself (the front must answer both), but the second one must be answered.
    const h = hidden(index);
    setHeader(q, "Content-Length", String(q.body.length));
    q.body = concatBytes(q.body, h);
  },
};
