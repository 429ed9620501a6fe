/**
 * Dependencies point one way: the bottom (core, config, metrics) imports nothing above it;
 * policies and workers import only the bottom; requests only core; proxy uses those; the HTTP/1.1
 * parsing (http1) sits under both the worker client (upstream) and the front; discovery turns
 * pods into workers; the status page (dashboard) reads metrics and workers; a folder's
 * `feature.ts` builds its optional part of the gateway from the layers below; only server wires
 * the gateway; the simulator (sim) stands apart on core and the engines' wire formats (grpc, kv);
 * commands sit on top. And no two files under lib/ import each other, directly or around a loop.
 * Read from `deno info --json`; type-only imports count.
 */

import assert from "node:assert/strict";
import { cycles } from "./support/import_graph.ts";

/** For each layer, the lib/ folders it may import. */
const ALLOWED: Record<string, string[]> = {
  core: ["core"],
  config: ["core", "config"],
  metrics: ["metrics"],
  requests: ["core", "requests"],
  policies: ["core", "config", "policies"],
  workers: ["core", "config", "workers"],
  // HTTP/1.1 parsing shared by the worker client and the front: heads, chunked bodies, the read
  // buffer. Pure functions over bytes; imports nothing.
  http1: ["http1"],
  // The HTTP/1.1 client toward workers; its pool sweeps and timeouts run on core's Clock.
  upstream: ["core", "http1", "upstream"],
  // The gateway-side tokenizer, cache and detokenizer: npm tokenizers and jinja over core.
  tokenizer: ["core", "tokenizer"],
  // KV-cache events from the engines: the ZMTP client, the decoder, the stream and the block
  // index, on core's Clock and host:port parsing.
  kv: ["core", "kv"],
  // sglang's scheduler service over gRPC: the proto codec and the client of one worker.
  grpc: ["core", "grpc"],
  // The own HTTP/1.1 front: the gateway's exchange types and cancellation (core) and the
  // HTTP/1.1 parsing; nothing of the worker client.
  front: ["core", "http1", "front"],
  // TLS files named by the config, read and checked, and the main port's certificate reload.
  tls: ["core", "config", "tls"],
  // OpenTelemetry tracing: W3C trace context, samplers, spans, the OTLP encoder, the export queue
  // and its transports, the settings read from the flags and OTEL_* variables.
  tracing: ["core", "config", "tracing"],
  proxy: [
    "core",
    "config",
    "metrics",
    "policies",
    "requests",
    "workers",
    "upstream",
    "tokenizer",
    "grpc",
    "limits",
    "tracing",
    "proxy",
  ],
  // Tenant resolution and per-tenant rate limits: the policy file, the buckets, the limiter.
  limits: ["core", "config", "metrics", "limits"],
  // The status page: its HTML and script, the routing history read from the metrics and the
  // snapshot of the workers; the composition root hands it the mesh as plain data.
  dashboard: ["core", "metrics", "workers", "dashboard"],
  // A folder's `feature.ts` builds that folder's optional part of the gateway (a `Feature`)
  // from its slice of the config and the services the composition root hands it: it may import
  // any layer below the root, other features' types; only the root imports it.
  feature: [
    "core",
    "config",
    "metrics",
    "policies",
    "workers",
    "limits",
    "proxy",
    "grpc",
    "kv",
    "dashboard",
    "discovery",
    "mesh",
    "mesh/adapters",
    "tls",
    "tracing",
    "feature",
  ],
  server: [
    "feature",
    "core",
    "config",
    "metrics",
    "dashboard",
    "policies",
    "requests",
    "workers",
    "proxy",
    "upstream",
    "front",
    "tokenizer",
    "grpc",
    "mesh",
    "mesh/adapters",
    "discovery",
    "kv",
    "tls",
    "limits",
    "tracing",
    "server",
  ],
  // The simulator on core, serving its events over sglang's gRPC codec and kv's ZeroMQ
  // publisher (what engines speak), never the gateway's own layers.
  sim: ["core", "grpc", "kv", "sim"],
  mesh: ["core", "config", "metrics", "mesh"],
  // Adapters bridge the mesh to workers and policies, and `feature.ts` among them wires the
  // router (its mTLS material read by tls); only the composition root imports them.
  "mesh/adapters": [
    "core",
    "config",
    "metrics",
    "mesh",
    "workers",
    "policies",
    "limits",
    "tls",
    "mesh/adapters",
  ],
  // Kubernetes discovery: pods to workers; only the composition root imports it.
  discovery: ["core", "config", "workers", "discovery"],
  launch: ["core", "config", "sim", "launch"],
  commands: [
    "workers",
    "core",
    "config",
    "policies",
    "server",
    "launch",
    "sim",
    "tokenizer",
    "grpc",
    "tls",
    "tracing",
    "commands",
  ],
};

/**
 * Import cycles between lib/ files that other branches of the same refactor remove; allowed here
 * only until those branches merge, which deletes their entries. Each entry is the files of one
 * cycle (a strongly connected component of the import graph), relative to lib/, sorted. An entry
 * that no longer matches a cycle fails the test too, so the list only shrinks.
 */

const root = new URL("../", import.meta.url);
const lib = new URL("lib/", root).href;

/** Each lib/ file (relative to lib/) and the lib/ files it imports, code or type-only. */
let graph: Promise<Map<string, string[]>> | null = null;

/**
 * Entry points whose graphs are read: the program, and modules nothing in it imports yet (they
 * are checked before they are wired in).
 */
const ROOTS = ["main.ts", "lib/kv/mod.ts"];

/** The import graph of lib/ as `deno info --json` reports it from each root, read once. */
function libGraph(): Promise<Map<string, string[]>> {
  return graph ??= (async () => {
    const g = new Map<string, string[]>();
    for (const entry of ROOTS) await addGraph(g, entry);
    return g;
  })();
}

/** Adds the lib/ files reachable from `entry` and their lib/ imports to `g`. */
async function addGraph(g: Map<string, string[]>, entry: string): Promise<void> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL(entry, root).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  type Dep = { code?: { specifier: string }; type?: { specifier: string } };
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: { specifier: string; dependencies?: Dep[] }[];
  };
  const inLib = (spec: string | undefined) =>
    spec !== undefined && spec.startsWith(lib) ? spec.slice(lib.length) : null;
  for (const m of info.modules) {
    const from = inLib(m.specifier);
    if (from === null) continue;
    const to = new Set<string>();
    for (const d of m.dependencies ?? []) {
      for (const target of [inLib(d.code?.specifier), inLib(d.type?.specifier)]) {
        if (target !== null) to.add(target);
      }
    }
    g.set(from, [...to]);
  }
}

/** The layer of a file relative to lib/: its folder, `mesh/adapters`, or `feature`. */
function layer(file: string): string {
  const parts = file.split("/");
  // `core/feature.ts` is the interface, at the bottom; every other folder's builds a feature.
  if (parts.length === 2 && parts[1] === "feature.ts" && parts[0] !== "core") return "feature";
  return parts[0] === "mesh" && parts[1] === "adapters" ? "mesh/adapters" : parts[0];
}

Deno.test("layering: every lib/ import points down", async () => {
  const g = await libGraph();
  const violations: string[] = [];
  let checked = 0;
  for (const [file, imports] of g) {
    const from = layer(file);
    assert.ok(ALLOWED[from], `lib/${from} has no layering rule; add it to this test`);
    for (const target of imports) {
      const to = layer(target);
      checked++;
      if (!ALLOWED[from].includes(to)) violations.push(`${file} -> lib/${to}`);
    }
  }
  assert.ok(checked > 20, "the module graph was read");
  assert.deepEqual(violations, []);
});

Deno.test("layering: no import cycle between lib/ files", async () => {
  const g = await libGraph();
  assert.ok(g.size > 20, "the module graph was read");
  assert.deepEqual(
    cycles(g).map((c) => c.join(" <-> ")),
    [],
    "import cycles between lib/ files: break them (move what both sides need into a third file)",
  );
});

/** The cycle finder itself: a loop of three, a file importing itself, and a graph without one. */
Deno.test("layering: cycles() finds loops of any length and nothing else", () => {
  const g = (edges: Record<string, string[]>) => new Map(Object.entries(edges));
  assert.deepEqual(cycles(g({ a: ["b"], b: ["c"], c: ["a"], d: ["a"] })), [["a", "b", "c"]]);
  assert.deepEqual(cycles(g({ a: ["a"], b: ["a"] })), [["a"]]);
  assert.deepEqual(cycles(g({ a: ["b", "c"], b: ["c"], c: [] })), []);
});
