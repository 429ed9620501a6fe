/**
 * The docs stay navigable: README.md's contents list names every one of its `##` sections, in
 * order, and every in-page link of README.md and BENCHMARKS.md (`](#anchor)`) reaches a heading,
 * by the anchors GitHub gives headings (lowercased, punctuation but `-` dropped, spaces as `-`,
 * repeats numbered).
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

Deno.test("docs: README's contents list every section, in order", async () => {
  const md = await Deno.readTextFile(new URL("README.md", ROOT));
  const start = md.indexOf("\n## Contents\n");
  assert.ok(start >= 0, "README.md has a ## Contents section");
  const end = md.indexOf("\n## ", start + 1);
  const listed = [...md.slice(start, end).matchAll(/^- \[[^\]]+\]\(#([^)]+)\)/gm)].map((m) => m[1]);
  const seen = new Map<string, number>();
  const sections = headings(md).filter((h) => h.level === 2).map((h) => anchor(h.text, seen))
    .filter((a) => a !== "contents");
  assert.deepEqual(listed, sections);
});

Deno.test("docs: every in-page link reaches a heading", async () => {
  for (const file of ["README.md", "BENCHMARKS.md"]) {
    const md = await Deno.readTextFile(new URL(file, ROOT));
    const known = anchors(md);
    const broken = [...md.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]).filter((a) =>
      !known.has(a)
    );
    assert.deepEqual(broken, [], `${file}: links to no heading`);
  }
});
