/**
 * The front's request side without a socket: a parsed head over an in-memory body source, and
 * the fetch `Request` a non-inference handler gets from it.
 */

import assert from "node:assert/strict";
import { type BodySource, FrontInbound, parseRequestHead } from "../../lib/front/request.ts";

const enc = new TextEncoder();

/** A request over `head` whose body source holds nothing more. */
function inbound(head: string): FrontInbound {
  const buf = enc.encode(head);
  const src: BodySource = {
    buf,
    start: buf.length,
    end: buf.length,
    fill: () => Promise.resolve(false),
    write: () => Promise.resolve(),
    authority: "127.0.0.1:30000",
    maxBody: 1024,
  };
  return new FrontInbound(parseRequestHead(buf, 0, buf.length), src);
}

Deno.test("front request: the Request URL takes the Host header when it makes a URL", async () => {
  const req = await inbound("GET /readiness?x=1 HTTP/1.1\r\nhost: gw.example:8080\r\n\r\n")
    .request();
  assert.equal(req.url, "http://gw.example:8080/readiness?x=1");
});

Deno.test("front request: a Host that makes no URL gives the front's own address, not a throw", async () => {
  // Each passes the host pattern but not the URL parser (an IPv4 address out of range).
  for (const host of ["12790.0.1", "c127.0.0.1", "1.2.3.256", "0x1g.1"]) {
    const req = await inbound(`GET /readiness HTTP/1.1\r\nhost: ${host}\r\n\r\n`).request();
    assert.equal(req.url, "http://127.0.0.1:30000/readiness", host);
  }
});
