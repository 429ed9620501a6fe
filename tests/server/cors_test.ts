/**
 * CORS as SMG's outermost layer, on both servers of the main port: preflights answered before
 * routing and keys, the headers on every other answer (proxied, local, errors, 404), any origin
 * by default and only the listed ones with `--cors-allowed-origins`.
 */

import assert from "node:assert/strict";
import { createCors } from "../../lib/server/cors.ts";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway, type TestGateway } from "../../support/gateway.ts";

const VARY = "origin, access-control-request-method, access-control-request-headers";
const APP = "https://app.example.com";
const chat = { model: "test-model", messages: [{ role: "user", content: "hello" }] };

/** The headers of `h` as an object, for whole comparisons. */
const obj = (h: [string, string][]) => Object.fromEntries(h);

Deno.test("cors: with no origins, any origin, method and header; bearer keys included", () => {
  const cors = createCors([]);
  const pre = cors.preflight(
    new Headers({
      origin: APP,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization,content-type",
    }),
  );
  assert.equal(pre.status, 200);
  assert.equal(pre.body, null);
  assert.deepEqual(obj(pre.headers), {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "*",
    // `*` would not cover Authorization: the asked headers are allowed by name.
    "access-control-allow-headers": "authorization,content-type",
    "access-control-max-age": "3600",
    vary: VARY,
  });
  assert.equal(
    obj(cors.preflight(new Headers()).headers)["access-control-allow-headers"],
    "*",
  );
  const h: [string, string][] = [["content-type", "application/json"]];
  cors.decorate(h, null);
  assert.deepEqual(obj(h), {
    "content-type": "application/json",
    "access-control-allow-origin": "*",
    "access-control-expose-headers": "*",
    vary: VARY,
  });
});

Deno.test("cors: with origins, only those, SMG's methods and headers, x-request-id exposed", () => {
  const cors = createCors([APP, "http://localhost:3000"]);
  const ask = (origin: string) =>
    obj(cors.preflight(new Headers({ origin, "access-control-request-method": "DELETE" })).headers);
  assert.deepEqual(ask(APP), {
    "access-control-allow-origin": APP,
    "access-control-allow-methods": "GET,POST,PATCH,DELETE,OPTIONS",
    "access-control-allow-headers": "content-type,authorization",
    "access-control-max-age": "3600",
    vary: VARY,
  });
  assert.equal(ask("https://evil.example")["access-control-allow-origin"], undefined);
  assert.equal(
    ask("https://app.example.com.evil.example")["access-control-allow-origin"],
    undefined,
  );
  const ok: [string, string][] = [];
  cors.decorate(ok, "http://localhost:3000");
  assert.deepEqual(obj(ok), {
    "access-control-allow-origin": "http://localhost:3000",
    "access-control-expose-headers": "x-request-id",
    vary: VARY,
  });
  const other: [string, string][] = [];
  cors.decorate(other, "https://evil.example");
  assert.deepEqual(obj(other), { "access-control-expose-headers": "x-request-id", vary: VARY });
});

Deno.test("cors: a worker's own CORS headers are replaced, its Vary kept", () => {
  const cors = createCors([APP]);
  const h: [string, string][] = [
    ["access-control-allow-origin", "*"],
    ["Access-Control-Allow-Credentials".toLowerCase(), "true"],
    ["vary", "accept-encoding"],
    ["x-worker", "w1"],
  ];
  cors.decorate(h, "https://evil.example");
  assert.deepEqual(h, [
    ["x-worker", "w1"],
    ["access-control-expose-headers", "x-request-id"],
    ["vary", `accept-encoding, ${VARY}`],
  ]);
  const star: [string, string][] = [["vary", "*"]];
  cors.decorate(star, APP);
  assert.deepEqual(obj(star)["vary"], "*");
});

/** An OPTIONS preflight of `path` from `origin`. */
function preflight(g: TestGateway, path: string, origin: string) {
  return fetch(g.url + path, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization,content-type",
    },
  });
}

for (const httpServer of ["own", "deno"] as const) {
  Deno.test(`cors (${httpServer}): any origin by default, on every kind of answer`, async () => {
    const w = new FakeWorker();
    const g = await startGateway([w.url], { httpServer, apiKey: "sekret" });
    try {
      // Preflights come before the key check (browsers send them without credentials) and before
      // routing (unknown paths too).
      for (const path of ["/v1/chat/completions", "/workers", "/no-such-path"]) {
        const pre = await preflight(g, path, APP);
        assert.equal(pre.status, 200, path);
        assert.equal(await pre.text(), "");
        assert.equal(pre.headers.get("access-control-allow-origin"), "*");
        assert.equal(pre.headers.get("access-control-allow-headers"), "authorization,content-type");
        assert.equal(pre.headers.get("access-control-max-age"), "3600");
      }
      const answers = [
        await fetch(`${g.url}/v1/chat/completions`, {
          method: "POST",
          headers: {
            origin: APP,
            authorization: "Bearer sekret",
            "content-type": "application/json",
          },
          body: JSON.stringify(chat),
        }),
        await fetch(`${g.url}/v1/chat/completions`, { method: "POST", headers: { origin: APP } }),
        await fetch(`${g.url}/health`, { headers: { origin: APP } }),
        await fetch(`${g.url}/readiness`),
        await fetch(`${g.url}/no-such-path`, { headers: { origin: APP } }),
      ];
      assert.deepEqual(answers.map((r) => r.status), [200, 401, 200, 200, 404]);
      for (const r of answers) {
        await r.body?.cancel();
        assert.equal(r.headers.get("access-control-allow-origin"), "*", r.url);
        assert.equal(r.headers.get("access-control-expose-headers"), "*", r.url);
        assert.equal(r.headers.get("vary"), VARY, r.url);
      }
    } finally {
      await g.close();
      await w.close();
    }
  });

  Deno.test(`cors (${httpServer}): with --cors-allowed-origins, only those origins`, async () => {
    const w = new FakeWorker();
    const g = await startGateway([w.url], {
      httpServer,
      corsAllowedOrigins: ["https://App.example.com/"],
    });
    try {
      const ok = await preflight(g, "/v1/chat/completions", APP);
      await ok.body?.cancel();
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get("access-control-allow-origin"), APP);
      assert.equal(ok.headers.get("access-control-allow-methods"), "GET,POST,PATCH,DELETE,OPTIONS");
      assert.equal(ok.headers.get("access-control-allow-headers"), "content-type,authorization");
      const no = await preflight(g, "/v1/chat/completions", "https://evil.example");
      await no.body?.cancel();
      assert.equal(no.headers.get("access-control-allow-origin"), null);

      const res = await fetch(`${g.url}/v1/chat/completions`, {
        method: "POST",
        headers: { origin: APP, "content-type": "application/json", "x-request-id": "req-cors-1" },
        body: JSON.stringify(chat),
      });
      assert.equal(res.status, 200);
      await res.body?.cancel();
      assert.equal(res.headers.get("access-control-allow-origin"), APP);
      assert.equal(res.headers.get("access-control-expose-headers"), "x-request-id");
      assert.equal(res.headers.get("x-request-id"), "req-cors-1");
      const evil = await fetch(`${g.url}/v1/models`, {
        headers: { origin: "https://evil.example" },
      });
      await evil.body?.cancel();
      assert.equal(evil.status, 200, "CORS tells browsers what to read; it refuses nothing");
      assert.equal(evil.headers.get("access-control-allow-origin"), null);
    } finally {
      await g.close();
      await w.close();
    }
  });
}
