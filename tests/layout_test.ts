/**
 * The repository's folders stay apart: `tests/` checks `lib/` with the shared harness of
 * `support/` (and its own helpers in `tests/support/`); `bench/` measures `lib/` with the same
 * harness; neither imports the other, `support/` imports neither, `lib/` none of the three; and no
 * files under them import each other around a loop. Read from the files' static relative imports
 * (`tests/support/import_graph.ts`), type-only ones included.
 */

import assert from "node:assert/strict";
import { cycles, importGraph, relativeImports } from "./support/import_graph.ts";

const root = new URL("../", import.meta.url);

/** What each top folder of code may import besides itself. */
const MAY_IMPORT: Record<string, string[]> = {
  lib: [],
  support: ["lib"],
  tests: ["lib", "support"],
  bench: ["lib", "support"],
};

let graph: Promise<Map<string, string[]>> | null = null;

/** The import graph of lib/, bench/, tests/ and support/, read once. */
function repoGraph(): Promise<Map<string, string[]>> {
  return graph ??= importGraph(root, Object.keys(MAY_IMPORT));
}

const top = (file: string) => file.split("/")[0];

Deno.test("layout: no import cycle among the files of lib/, bench/, tests/ and support/", async () => {
  const g = await repoGraph();
  assert.ok(g.size > 300, "the files were read");
  assert.deepEqual(
    cycles(g).map((c) => c.join(" <-> ")),
    [],
    "import cycles: break them (move what both sides need into a third file)",
  );
});

Deno.test("layout: tests/ imports no bench/ file and bench/ no tests/ file", async () => {
  const crossing = [...await repoGraph()].flatMap(([file, imports]) =>
    imports
      .filter((t) =>
        (top(file) === "tests" && top(t) === "bench") ||
        (top(file) === "bench" && top(t) === "tests")
      )
      .map((t) => `${file} -> ${t}`)
  );
  assert.deepEqual(
    crossing,
    [],
    "what both need belongs in support/; a check of bench code sits beside it in bench/",
  );
});

Deno.test("layout: each folder imports only the folders below it", async () => {
  const g = await repoGraph();
  const violations: string[] = [];
  let edges = 0;
  for (const [file, imports] of g) {
    const from = top(file);
    for (const target of imports) {
      edges++;
      const to = top(target);
      if (!(to in MAY_IMPORT)) continue; // deno.json, proto/: data, not code
      if (to !== from && !MAY_IMPORT[from].includes(to)) violations.push(`${file} -> ${target}`);
    }
  }
  assert.ok(edges > 1000, "the imports were read");
  assert.deepEqual(violations, []);
});

Deno.test("layout: every relative import names a file that exists", async () => {
  const g = await repoGraph();
  const missing: string[] = [];
  for (const [file, imports] of g) {
    for (const target of imports) {
      if (!g.has(target) && !(await exists(new URL(target, root)))) {
        missing.push(`${file} -> ${target}`);
      }
    }
  }
  assert.deepEqual(missing, [], "the import reader resolves specifiers as Deno does");
});

/** Whether `url` names an existing file. */
async function exists(url: URL): Promise<boolean> {
  try {
    return (await Deno.stat(url)).isFile;
  } catch {
    return false;
  }
}

/** The reader itself: what counts as an edge and what does not. */
Deno.test("layout: relativeImports reads static imports and re-exports only", () => {
  const text = [
    'import assert from "node:assert/strict";',
    'import { a, type B } from "./a.ts";',
    "import {",
    "  c,",
    "  d,",
    '} from "../c.ts";',
    'import type { E } from "./e.ts";',
    'import * as f from "./f.ts";',
    'import g, { h } from "./g.ts";',
    'import "./side_effect.ts";',
    'export { i } from "./i.ts";',
    'export * from "./all.ts";',
    'export type { J } from "./j.ts";',
    'const k = await import("./dynamic.ts");',
    'const l = new URL("./script.ts", import.meta.url);',
    '// import { m } from "./commented.ts" is not at a line start',
    'import { n } from "npm:n";',
  ].join("\n");
  assert.deepEqual(relativeImports(text), [
    "./a.ts",
    "../c.ts",
    "./e.ts",
    "./f.ts",
    "./g.ts",
    "./side_effect.ts",
    "./i.ts",
    "./all.ts",
    "./j.ts",
  ]);
});
