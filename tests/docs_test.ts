/**
 * The docs stay navigable: README.md's contents list names every page of docs/, every relative
 * link of README.md, BENCHMARKS.md, its archive and docs/*.md reaches a file, and its anchor a
 * heading of that file (in-page `#anchor` or `docs/x.md#anchor`), by the anchors GitHub gives
 * headings (lowercased, punctuation but `-` dropped, spaces as `-`, repeats numbered); README.md
 * stays under 40 KB and BENCHMARKS.md under 60 KB.
 */

import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);

/** Heading lines (level, text) outside fenced code blocks. */
function headings(md: string): { level: number; text: string }[] {
  const out: { level: number; text: string }[] = [];
  let fenced = false;
  for (const line of md.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = !fenced && /^(#{1,6}) (.+)$/.exec(line);
    if (m) out.push({ level: m[1].length, text: m[2].trim() });
  }
  return out;
}

/** GitHub's anchor for a heading's text, numbered when `seen` had it already. */
export function anchor(text: string, seen: Map<string, number>): string {
  const base = text.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replaceAll(" ", "-");
  const n = seen.get(base) ?? 0;
  seen.set(base, n + 1);
  return n === 0 ? base : `${base}-${n}`;
}

function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  return new Set(headings(md).map((h) => anchor(h.text, seen)));
}

Deno.test("docs: anchors are GitHub's", () => {
  const seen = new Map<string, number>();
  assert.equal(anchor("Prefill/decode disaggregation", seen), "prefilldecode-disaggregation");
  assert.equal(
    anchor("`smg serve` and the simulated engine", seen),
    "smg-serve-and-the-simulated-engine",
  );
  assert.equal(
    anchor("KV-event mode: routing on what workers hold", seen),
    "kv-event-mode-routing-on-what-workers-hold",
  );
  assert.equal(anchor("Reading", seen), "reading");
  assert.equal(anchor("Reading", seen), "reading-1");
});

/** The markdown files whose links are checked: the front page, the benchmarks, docs/. */
async function markdownFiles(): Promise<string[]> {
  const docs: string[] = [];
  for await (const e of Deno.readDir(new URL("docs/", ROOT))) {
    if (e.isFile && e.name.endsWith(".md")) docs.push(`docs/${e.name}`);
  }
  return ["README.md", "BENCHMARKS.md", "BENCHMARKS-archive.md", ...docs.sort()];
}

/** Links outside fenced code blocks: `[text](target)`, images included. */
function links(md: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of md.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced) continue;
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) out.push(m[1]);
  }
  return out;
}

Deno.test("docs: README's contents list every page of docs/", async () => {
  const md = await Deno.readTextFile(new URL("README.md", ROOT));
  const start = md.indexOf("\n## Contents\n");
  assert.ok(start >= 0, "README.md has a ## Contents section");
  const end = md.indexOf("\n## ", start + 1);
  const listed = [...md.slice(start, end).matchAll(/^- \[[^\]]+\]\(([^)#]+)\)/gm)].map((m) => m[1]);
  const pages = (await markdownFiles()).filter((f) => f.startsWith("docs/"));
  assert.deepEqual(
    listed.filter((l) => l.startsWith("docs/")).sort(),
    pages,
    "README's contents list each page of docs/ once",
  );
  assert.ok(listed.includes("BENCHMARKS.md"), "README's contents list BENCHMARKS.md");
});

Deno.test("docs: every relative link reaches a file, and its anchor a heading there", async () => {
  const cache = new Map<string, Set<string>>();
  const anchorsOf = async (url: URL) => {
    const key = url.href;
    if (!cache.has(key)) cache.set(key, anchors(await Deno.readTextFile(url)));
    return cache.get(key)!;
  };
  for (const file of await markdownFiles()) {
    const base = new URL(file, ROOT);
    const broken: string[] = [];
    for (const link of links(await Deno.readTextFile(base))) {
      if (/^[a-z]+:/i.test(link)) continue; // https:, mailto:
      const [path, anchor] = link.split("#", 2) as [string, string | undefined];
      const target = path === "" ? base : new URL(path, base);
      try {
        await Deno.stat(target);
      } catch {
        broken.push(`${link} (no such file)`);
        continue;
      }
      if (anchor !== undefined && !(await anchorsOf(target)).has(anchor)) {
        broken.push(`${link} (no such heading)`);
      }
    }
    assert.deepEqual(broken, [], `${file}: links that reach nothing`);
  }
});

Deno.test("docs: README stays a front page and BENCHMARKS.md a summary", async () => {
  const size = async (f: string) => (await Deno.stat(new URL(f, ROOT))).size;
  const readme = await size("README.md");
  assert.ok(
    readme < 40 * 1024,
    `README.md is ${readme} bytes; keep it under 40 KB (move to docs/)`,
  );
  const bench = await size("BENCHMARKS.md");
  assert.ok(
    bench < 60 * 1024,
    `BENCHMARKS.md is ${bench} bytes; keep it under 60 KB (move older runs to BENCHMARKS-archive.md)`,
  );
});
