/**
 * Time is passed in, never defaulted below the composition root (issue 36): a module under lib/
 * takes the `Clock` it is given and does not fall back to `systemClock`, so a test's `FakeClock`
 * reaches every loop and timer. Only the entry points below may name `systemClock`. Read from
 * the source text; comments count (a comment naming it is a stale "default systemClock").
 */

import assert from "node:assert/strict";

/** Where `systemClock` may be named (a path, or a folder ending in "/"), and why. */
const ENTRY_POINTS: Record<string, string> = {
  "lib/core/clock.ts": "defines it",
  "lib/server/app.ts": "the Gateway's `opts.clock ?? systemClock`, the one allowed default",
  "lib/commands/": "the programs' entry points",
  "lib/sim/": "the simulator is its own program; its worker's entry runs on wall time",
};

const LIB = new URL("../lib/", import.meta.url);

/** Every .ts file under lib/, as `lib/...` paths. */
async function libFiles(dir = LIB, prefix = "lib/"): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) {
      out.push(...await libFiles(new URL(`${e.name}/`, dir), `${prefix}${e.name}/`));
    } else if (e.isFile && e.name.endsWith(".ts")) out.push(`${prefix}${e.name}`);
  }
  return out.sort();
}

const exempt = (path: string) =>
  Object.keys(ENTRY_POINTS).some((p) => p.endsWith("/") ? path.startsWith(p) : path === p);

Deno.test("system clock: named only at entry points; everything below takes the clock it is given", async () => {
  const files = await libFiles();
  assert.ok(files.length > 100, "lib/ was read");
  for (const p of Object.keys(ENTRY_POINTS)) {
    assert.ok(files.some((f) => f.startsWith(p)), `${p} is gone: drop it from ENTRY_POINTS`);
  }
  const named: string[] = [];
  for (const f of files) {
    if (exempt(f)) continue;
    const text = await Deno.readTextFile(new URL(f.slice("lib/".length), LIB));
    if (/\bsystemClock\b/.test(text)) named.push(f);
  }
  assert.deepEqual(
    named,
    [],
    "these files name systemClock: take a required `clock` from the caller instead",
  );
});
