/**
 * The simulator is loaded by the commands that run it (`sim-worker`, `serve --backend sim`), not
 * at every start: from main.ts, static imports (what loads before any command runs) reach only
 * the sim-worker flag parser, which the launcher needs for the sim-worker's net grant. Read from
 * `deno info --json`; dynamic imports are the edges not followed.
 */

import assert from "node:assert/strict";

Deno.test("sim: a start of the program loads only lib/sim's flag parser", async () => {
  const root = new URL("../../", import.meta.url);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL("main.ts", root).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    roots: string[];
    modules: {
      specifier: string;
      dependencies?: { code?: { specifier: string }; isDynamic?: boolean }[];
    }[];
  };
  const deps = new Map(info.modules.map((m) => [m.specifier, m.dependencies ?? []]));
  const loaded = new Set<string>();
  const visit = (s: string) => {
    if (loaded.has(s)) return;
    loaded.add(s);
    for (const d of deps.get(s) ?? []) if (!d.isDynamic && d.code) visit(d.code.specifier);
  };
  visit(info.roots[0]);
  const sim = new URL("lib/sim/", root).href;
  assert.ok(loaded.size > 50, "the module graph was read");
  assert.ok(
    info.modules.some((m) => m.specifier === `${sim}engine.ts`),
    "the simulator is in the program, behind a dynamic import",
  );
  assert.deepEqual(
    [...loaded].filter((s) => s.startsWith(sim)).map((s) => s.slice(sim.length)).sort(),
    ["cli.ts", "piece_cutter.ts"],
  );
});
