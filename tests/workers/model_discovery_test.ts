/**
 * Model discovery with a fake fetch: `/v1/models` first (ids deduplicated), then sglang's
 * `/get_model_info`, and null (serve any model) when neither says, the worker is unreachable or
 * it does not answer in time.
 */

import assert from "node:assert/strict";
import { discoverCapacity, discoverModels } from "../../lib/workers/model_discovery.ts";
import type { FetchFn } from "../../lib/workers/http.ts";

type Route = () => Response | Promise<Response>;

/** A fake worker at http://w answering `routes` by path (404 otherwise), recording calls. */
function fake(routes: Record<string, Route>) {
  const calls: { path: string; auth: string | null; method: string }[] = [];
  const fetchFn: FetchFn = (url, init) => {
    const path = new URL(url).pathname;
    calls.push({
      path,
      auth: new Headers(init.headers).get("authorization"),
      method: init.method ?? "GET",
    });
    const r = routes[path];
    return Promise.resolve(r ? r() : new Response("not found", { status: 404 }));
  };
  return { fetchFn, calls };
}

const models = (...ids: unknown[]) => () =>
  Response.json({ object: "list", data: ids.map((id) => ({ id, object: "model" })) });

Deno.test("discoverModels: /v1/models ids, duplicates removed, order kept", async () => {
  const { fetchFn, calls } = fake({ "/v1/models": models("b", "a", "b", "c", "a") });
  assert.deepEqual(await discoverModels(fetchFn, "http://w", 1000, null), ["b", "a", "c"]);
  assert.deepEqual(calls.map((c) => c.path), ["/v1/models"], "no fallback needed");
  assert.equal(calls[0].method, "GET");
});

Deno.test("discoverModels: entries without a string id are skipped", async () => {
  const { fetchFn } = fake({ "/v1/models": models(7, null, "ok", { x: 1 }) });
  assert.deepEqual(await discoverModels(fetchFn, "http://w", 1000, null), ["ok"]);
});

Deno.test("discoverModels: falls back to /get_model_info served_model_name, then model_path", async () => {
  const both = fake({
    "/get_model_info": () =>
      Response.json({ model_path: "/models/llama-3-8b", served_model_name: "llama" }),
  });
  assert.deepEqual(await discoverModels(both.fetchFn, "http://w", 1000, null), ["llama"]);
  assert.deepEqual(both.calls.map((c) => c.path), ["/v1/models", "/get_model_info"]);

  const pathOnly = fake({
    "/get_model_info": () => Response.json({ model_path: "/models/qwen" }),
  });
  assert.deepEqual(await discoverModels(pathOnly.fetchFn, "http://w", 1000, null), [
    "/models/qwen",
  ]);
});

Deno.test("discoverModels: an empty or unparsable /v1/models list falls back too", async () => {
  const info = () => Response.json({ model_path: "m" });
  for (
    const list of [
      models(),
      () => new Response("<html>oops</html>"),
      () => Response.json({ object: "list" }),
      () => Response.json({ data: [null, { id: 3 }] }),
      () => new Response("boom", { status: 500 }),
      () => new Response("gone", { status: 404 }),
    ]
  ) {
    const { fetchFn } = fake({ "/v1/models": list, "/get_model_info": info });
    assert.deepEqual(await discoverModels(fetchFn, "http://w", 1000, null), ["m"]);
  }
});

Deno.test({
  name: "discoverModels: a /v1/models body whose data is not an array falls back, not throws",
  fn: async () => {
    for (const data of ["nope", {}, 7]) {
      const { fetchFn } = fake({
        "/v1/models": () => Response.json({ data }),
        "/get_model_info": () => Response.json({ model_path: "m" }),
      });
      assert.deepEqual(await discoverModels(fetchFn, "http://w", 1000, null), ["m"]);
    }
  },
});

Deno.test("discoverModels: null when neither endpoint names a model", async () => {
  const cases: Record<string, Route>[] = [
    {},
    { "/get_model_info": () => Response.json({}) },
    { "/get_model_info": () => Response.json({ model_path: "" }) },
    { "/get_model_info": () => Response.json({ model_path: 42 }) },
    { "/get_model_info": () => new Response("not json") },
    { "/get_model_info": () => Response.json({ model_path: "m" }, { status: 500 }) },
  ];
  for (const routes of cases) {
    const { fetchFn } = fake(routes);
    assert.equal(await discoverModels(fetchFn, "http://w", 1000, null), null);
  }
});

Deno.test("discoverModels: the worker's key is sent as a bearer on both calls", async () => {
  const { fetchFn, calls } = fake({ "/get_model_info": () => Response.json({ model_path: "m" }) });
  await discoverModels(fetchFn, "http://w", 1000, "sk-worker");
  assert.deepEqual(calls.map((c) => c.auth), ["Bearer sk-worker", "Bearer sk-worker"]);
  const anon = fake({});
  await discoverModels(anon.fetchFn, "http://w", 1000, null);
  assert.deepEqual(anon.calls.map((c) => c.auth), [null, null]);
});

Deno.test("discoverModels: a transport error gives null", async () => {
  const fetchFn: FetchFn = () => Promise.reject(new TypeError("error sending request: refused"));
  assert.equal(await discoverModels(fetchFn, "http://w", 1000, null), null);
});

Deno.test("discoverModels: a worker that never answers gives null after the timeout", async () => {
  let calls = 0;
  const fetchFn: FetchFn = (_url, init) => {
    calls++;
    return new Promise((_resolve, reject) => {
      init.signal!.addEventListener("abort", () => reject(init.signal!.reason), { once: true });
    });
  };
  assert.equal(await discoverModels(fetchFn, "http://w", 5, null), null);
  assert.equal(calls, 2, "each endpoint gets its own timeout");
});

Deno.test("discoverModels: an aborted outer signal stops discovery with null", async () => {
  const ac = new AbortController();
  const fetchFn: FetchFn = (_url, init) =>
    new Promise((_resolve, reject) => {
      if (init.signal!.aborted) return reject(init.signal!.reason);
      init.signal!.addEventListener("abort", () => reject(init.signal!.reason), { once: true });
      ac.abort(new Error("shutdown"));
    });
  assert.equal(await discoverModels(fetchFn, "http://w", 60_000, null, ac.signal), null);
});

Deno.test("discoverCapacity: sglang's max_total_num_tokens, top level or in scheduler_info; else null", async () => {
  const info = (body: unknown) => ({ "/get_server_info": () => Response.json(body) });
  const cap = (routes: Record<string, Route>) =>
    discoverCapacity(fake(routes).fetchFn, "http://w", 1000, null);
  assert.equal(await cap(info({ max_total_num_tokens: 262144 })), 262144);
  assert.equal(await cap(info({ scheduler_info: { max_total_num_tokens: 65536 } })), 65536);
  assert.equal(await cap(info({ max_total_num_tokens: "lots" })), null);
  assert.equal(await cap(info({ max_total_num_tokens: 0 })), null);
  assert.equal(await cap({}), null, "no such endpoint (vLLM)");
  assert.equal(await cap({ "/get_server_info": () => new Response("oops") }), null);
});
