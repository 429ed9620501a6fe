/**
 * Structured mutations of JSON values for the body fuzzers: a field set to a value of another
 * type, removed, added, nested deep, or a string bent with awkward characters; and the text of
 * a value bent after serialising (huge numbers, duplicate keys, lone surrogates, invalid UTF-8,
 * truncation, byte flips). Drawn from a seeded `Random`.
 */

import type { Random } from "../../lib/core/clock.ts";
import {
  AWKWARD_NUMBERS,
  AWKWARD_STRINGS,
  chance,
  concatBytes,
  int,
  mutateBytes,
  pick,
  randomText,
} from "./mutate.ts";

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const enc = new TextEncoder();

/** A value of a random type, sometimes awkward, sometimes nested. */
export function randomValue(r: Random, depth = 0): Json {
  switch (int(r, 0, depth > 2 ? 5 : 7)) {
    case 0:
      return null;
    case 1:
      return chance(r, 0.5);
    case 2:
      return pick(r, [0, -1, 1, 1.5, -0.5, 2 ** 31, 2 ** 53, -(2 ** 53), 1e300, Number.MIN_VALUE]);
    case 3:
      return pick(r, AWKWARD_STRINGS);
    case 4:
      return randomText(r, int(r, 0, 12));
    case 5:
      return "";
    case 6:
      return Array.from({ length: int(r, 0, 3) }, () => randomValue(r, depth + 1));
    default: {
      const o: { [k: string]: Json } = {};
      for (let i = int(r, 0, 3); i > 0; i--) {
        own(o, pick(r, FIELD_NAMES), randomValue(r, depth + 1));
      }
      return o;
    }
  }
}

/** Field names the gateway reads, and some it does not. */
export const FIELD_NAMES: readonly string[] = [
  "model",
  "messages",
  "prompt",
  "text",
  "input_ids",
  "input",
  "query",
  "documents",
  "stream",
  "stream_options",
  "max_tokens",
  "max_completion_tokens",
  "n",
  "rid",
  "role",
  "content",
  "type",
  "sampling_params",
  "input_embeds",
  "__proto__",
  "constructor",
  "x",
];

/** Sets an own property, `__proto__` included (an assignment would set the prototype). */
function own(o: { [k: string]: Json }, key: string, v: Json): void {
  Object.defineProperty(o, key, { value: v, enumerable: true, writable: true, configurable: true });
}

/** The paths (keys and indexes) of every value inside `v`, `v` itself included as []. */
function paths(v: Json, at: (string | number)[] = [], out: (string | number)[][] = []) {
  out.push(at);
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out));
  else if (v !== null && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) paths(x, [...at, k], out);
  }
  return out;
}

function parentOf(root: Json, path: (string | number)[]): Json {
  let v = root;
  for (const p of path.slice(0, -1)) v = (v as Record<string | number, Json>)[p];
  return v;
}

/** `v` with one structural mutation (a new value; `v` is left alone). */
export function mutateValue(r: Random, v: Json): Json {
  const root = structuredClone(v) as Json;
  const all = paths(root);
  const path = pick(r, all);
  if (path.length === 0) {
    return pick(r, [() => [root], () => randomValue(r), () => deepNest(r, root)])();
  }
  const parent = parentOf(root, path) as Record<string | number, Json>;
  const key = path[path.length - 1];
  const kind = int(r, 0, 6);
  if (kind === 0) {
    if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key];
  } else if (kind === 1) parent[key] = randomValue(r);
  else if (kind === 2) parent[key] = deepNest(r, parent[key]);
  else if (kind === 3 && typeof parent[key] === "string") {
    parent[key] = bendString(r, parent[key] as string);
  } else if (kind === 4 && !Array.isArray(parent)) {
    own(parent as { [k: string]: Json }, pick(r, FIELD_NAMES), randomValue(r));
  } else if (kind === 5 && Array.isArray(parent[key])) {
    const list = parent[key] as Json[];
    const n = int(r, 0, 2) === 0 ? 0 : int(r, 2, 200);
    parent[key] = n === 0
      ? []
      : Array.from({ length: n }, (_, i) => list[i % Math.max(1, list.length)] ?? null);
  } else parent[key] = randomValue(r);
  return root;
}

/** `v` wrapped in a few levels of arrays or objects (very deep nesting is a text bend). */
function deepNest(r: Random, v: Json): Json {
  const levels = int(r, 1, 40);
  let out = v;
  for (let i = 0; i < levels; i++) out = chance(r, 0.5) ? [out] : { x: out };
  return out;
}

function bendString(r: Random, s: string): string {
  const at = int(r, 0, s.length);
  const ins = chance(r, 0.3) ? "x".repeat(int(r, 1000, 20000)) : pick(r, AWKWARD_STRINGS);
  return s.slice(0, at) + ins + s.slice(at);
}

/** The text of `v`, sometimes bent after serialising: bytes, since some bends are not UTF-8. */
export function serialise(r: Random, v: Json): { bytes: Uint8Array; bent: string | null } {
  const text = JSON.stringify(v) ?? "null";
  if (chance(r, 0.7)) return { bytes: enc.encode(text), bent: null };
  const bend = int(r, 0, 7);
  switch (bend) {
    case 0: { // a number's text replaced by an awkward one
      const m = /-?\d+(\.\d+)?/.exec(text);
      const out = m
        ? text.slice(0, m.index) + pick(r, AWKWARD_NUMBERS) + text.slice(m.index + m[0].length)
        : text;
      return { bytes: enc.encode(out), bent: "number" };
    }
    case 1: // a duplicate key
      return {
        bytes: enc.encode(text.replace(/^\{/, `{"model":${JSON.stringify(randomValue(r))},`)),
        bent: "dup-key",
      };
    case 2: // a lone surrogate or control escape in a string
      return {
        bytes: enc.encode(
          text.replace(/":"/, `":"${pick(r, ["\\ud800", "\\udfff\\ud800", "\\u0000", "\\b"])}`),
        ),
        bent: "escape",
      };
    case 3: { // invalid UTF-8 inside a string
      const b = enc.encode(text);
      const q = b.indexOf(34);
      const bad = Uint8Array.of(pick(r, [0xc0, 0xff, 0xed, 0x80]), pick(r, [0x80, 0xa0, 0x20]));
      return {
        bytes: q < 0 ? b : concatBytes(b.subarray(0, q + 1), bad, b.subarray(q + 1)),
        bent: "utf8",
      };
    }
    case 4: // truncated
      return {
        bytes: enc.encode(text.slice(0, int(r, 0, Math.max(0, text.length - 1)))),
        bent: "truncated",
      };
    case 5: // surrounded by whitespace, a BOM or trailing garbage
      return {
        bytes: enc.encode(pick(r, [` \n${text}\t`, `\ufeff${text}`, `${text}x`, `${text}${text}`])),
        bent: "around",
      };
    case 6: { // nested far deeper than any body needs
      const n = int(r, 1000, 100_000);
      return { bytes: enc.encode(`${"[".repeat(n)}${text}${"]".repeat(n)}`), bent: "deep" };
    }
    default: {
      let b: Uint8Array = enc.encode(text);
      for (let i = int(r, 1, 3); i > 0; i--) b = mutateBytes(r, b);
      return { bytes: b, bent: "bytes" };
    }
  }
}
