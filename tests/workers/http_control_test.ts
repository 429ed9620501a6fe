/**
 * The HTTP worker control against a fake fetch: which request each call sends (method, path,
 * bearer key), that the timeout ends a call that hangs, and that a transport error, the
 * runtime's refusal included, is a result with the error's text.
 */

import assert from "node:assert/strict";
import { type FetchFn, RUNTIME_REFUSED } from "../../lib/workers/http.ts";
import { httpWorkerControl } from "../../lib/workers/http_control.ts";

Deno.test("http control: each call's method, path and bearer key", async () => {
  const sent: string[] = [];
  const fetchFn: FetchFn = (url, init) => {
    const auth = new Headers(init.headers).get("authorization");
    sent.push(`${init.method} ${url} ${auth}`);
    return Promise.resolve(new Response("not found", { status: 404 }));
  };
  const c = httpWorkerControl(fetchFn);
  const w = { url: "http://w:8000", apiKey: "sk" };
  const call = { timeoutMs: 1000 };
  await c.probe(w, "/healthz", call);
  await c.healthGenerate(w, call);
  await c.serverInfo(w, call);
  await c.modelInfo(w, call);
  await c.flushCache(w, call);
  await c.models(w, call);
  await c.kvCapacity(w, call);
  await c.load(w, call);
  await c.probe({ url: "http://open", apiKey: null }, "/health", call);
  assert.deepEqual(sent, [
    "GET http://w:8000/healthz Bearer sk",
    "GET http://w:8000/health_generate Bearer sk",
    "GET http://w:8000/get_server_info Bearer sk",
    "GET http://w:8000/get_model_info Bearer sk",
    "POST http://w:8000/flush_cache Bearer sk",
    "GET http://w:8000/v1/models Bearer sk",
    "GET http://w:8000/get_model_info Bearer sk",
    "GET http://w:8000/get_server_info Bearer sk",
    "GET http://w:8000/v1/loads?include=core,disagg,queues,memory Bearer sk",
    "GET http://w:8000/get_load Bearer sk",
    "GET http://w:8000/metrics Bearer sk",
    "GET http://open/health null",
  ]);
});

Deno.test("http control: a hung call times out, a refused one says so; neither throws", async () => {
  const hung: FetchFn = (_url, init) =>
    new Promise((_, reject) =>
      init.signal!.addEventListener("abort", () => reject(new Error("x")))
    );
  const w = { url: "http://w", apiKey: null };
  assert.deepEqual(await httpWorkerControl(hung).probe(w, "/health", { timeoutMs: 5 }), {
    status: 0,
    text: "",
    error: "timed out after 5 ms",
  });
  const refused: FetchFn = () =>
    Promise.reject(new TypeError("fetch failed", { cause: new Deno.errors.NotCapable("no") }));
  const r = await httpWorkerControl(refused).flushCache(w, { timeoutMs: 1000 });
  assert.equal(r.status, 0);
  assert.ok(r.error?.startsWith(RUNTIME_REFUSED), String(r.error));
});
