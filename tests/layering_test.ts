/**
 * Dependencies point one way: the bottom (core, config, metrics) imports nothing above it;
 * policies and workers import only the bottom; routing only core; the upstream client only
 * core's clock; proxy uses those; discovery turns pods into workers; only server wires the
 * gateway; the simulator (sim) stands apart on core; commands sit on top. Read from
 * `deno info --json`.
 */

import assert from "node:assert/strict";

/** For each layer, the lib/ folders it may import. */
const ALLOWED: Record<string, string[]> = {
  core: ["core"],
  config: ["core", "config"],
  metrics: ["metrics"],
  routing: ["core", "routing"],
  policies: ["core", "config", "policies"],
  workers: ["core", "config", "workers"],
  // The HTTP/1.1 client toward workers; its pool sweeps and timeouts run on core's Clock.
  upstream: ["core", "upstream"],
  // The gateway-side tokenizer, cache and detokenizer: npm tokenizers and jinja over core.
  tokenizer: ["core", "tokenizer"],
  // sglang's scheduler service over gRPC: the proto codec and the client of one worker.
  grpc: ["core", "grpc"],
  // The own HTTP/1.1 front: the gateway's exchange types (core) and the HTTP/1.1 parser.
  front: ["core", "upstream", "front"],
  proxy: [
    "core",
    "config",
    "metrics",
    "policies",
    "routing",
    "workers",
    "upstream",
    "tokenizer",
    "grpc",
    "proxy",
  ],
  server: [
    "core",
    "config",
    "metrics",
    "policies",
    "routing",
    "workers",
    "proxy",
    "upstream",
    "front",
    "tokenizer",
    "grpc",
    "mesh",
    "mesh/adapters",
    "discovery",
    "server",
  ],
  sim: ["core", "grpc", "sim"],
  mesh: ["core", "config", "metrics", "mesh"],
  // Adapters bridge the mesh to workers and policies; only the composition root imports them.
  "mesh/adapters": ["core", "config", "metrics", "mesh", "workers", "policies", "mesh/adapters"],
  // Kubernetes discovery: pods to workers; only the composition root imports it.
  discovery: ["core", "config", "workers", "discovery"],
  serve: ["core", "config", "sim", "serve"],
  commands: [
    "core",
    "config",
    "policies",
    "server",
    "serve",
    "sim",
    "tokenizer",
    "grpc",
    "commands",
  ],
};

Deno.test("layering: every lib/ import points down", async () => {
  const root = new URL("../", import.meta.url);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL("main.ts", root).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: { specifier: string; dependencies?: { code?: { specifier: string } }[] }[];
  };
  const lib = new URL("lib/", root).href;
  const layer = (spec: string) => {
    if (!spec.startsWith(lib)) return null;
    const parts = spec.slice(lib.length).split("/");
    return parts[0] === "mesh" && parts[1] === "adapters" ? "mesh/adapters" : parts[0];
  };
  const violations: string[] = [];
  let checked = 0;
  for (const m of info.modules) {
    const from = layer(m.specifier);
    if (!from) continue;
    assert.ok(ALLOWED[from], `lib/${from} has no layering rule; add it to this test`);
    for (const d of m.dependencies ?? []) {
      const target = d.code?.specifier;
      const to = target ? layer(target) : null;
      if (!to) continue;
      checked++;
      if (!ALLOWED[from].includes(to)) {
        violations.push(`${m.specifier.slice(lib.length)} -> lib/${to}`);
      }
    }
  }
  assert.ok(checked > 20, "the module graph was read");
  assert.deepEqual(violations, []);
});
