/**
 * The files of lib/config import each other in one direction (types, then declarations, then
 * parsing and validation): no cycle, type-only imports included. Read from `deno info --json`.
 */

import assert from "node:assert/strict";

Deno.test("config: the files of lib/config import each other without a cycle", async () => {
  const root = new URL("../../", import.meta.url);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL("lib/config/config.ts", root).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: {
      specifier: string;
      dependencies?: { code?: { specifier: string }; type?: { specifier: string } }[];
    }[];
  };
  const dir = new URL("lib/config/", root).href;
  const imports = new Map<string, string[]>();
  for (const m of info.modules) {
    if (!m.specifier.startsWith(dir)) continue;
    const deps = (m.dependencies ?? []).flatMap((d) => [d.code?.specifier, d.type?.specifier]);
    imports.set(
      m.specifier.slice(dir.length),
      deps.filter((s): s is string => s?.startsWith(dir) ?? false).map((s) => s.slice(dir.length)),
    );
  }
  assert.ok(imports.size >= 10, "the module graph was read");
  const done = new Set<string>();
  const visit = (file: string, path: string[]) => {
    assert.ok(!path.includes(file), `cycle: ${[...path, file].join(" -> ")}`);
    if (done.has(file)) return;
    for (const next of imports.get(file) ?? []) visit(next, [...path, file]);
    done.add(file);
  };
  for (const file of imports.keys()) visit(file, []);
});
