/**
 * A declaration's types follow its field's: `deno check` fails this file if any line marked
 * `@ts-expect-error` (a declaration that does not fit its field) were accepted.
 */

import assert from "node:assert/strict";
import type { Flags } from "../../lib/config/flag.ts";
import { bool, choices, float, int, intList, list, str } from "../../lib/config/kinds.ts";

interface Sample {
  n: number;
  s: string;
  b: boolean;
  l: string[];
  il: number[];
  c: "a" | "b";
  maybe: number | null;
}

const ok: Flags<Sample> = {
  n: { name: "n", kind: float, default: 1.5, help: "a number", check: (_, v) => v },
  s: { name: "s", kind: str, default: "x", help: "a string" },
  b: { name: "b", kind: bool, default: false, help: "a switch" },
  l: { name: "l", kind: list, default: [], help: "a list" },
  il: { name: "il", kind: intList, default: [1, 2], help: "integers" },
  c: { name: "c", kind: choices(["a", "b"]), default: "a", help: "a choice" },
  maybe: { name: "maybe", kind: int, default: null, help: "a number or nothing" },
};

Deno.test("flag declarations: each kind fits only a field of its type", () => {
  assert.equal(Object.keys(ok).length, 7);
  const mismatches: Partial<Flags<Sample>>[] = [
    // @ts-expect-error an int flag cannot declare a string field
    { s: { name: "s", kind: int, default: "x", help: "" } },
    // @ts-expect-error a string flag cannot declare a number field
    { n: { name: "n", kind: str, default: 1, help: "" } },
    // @ts-expect-error a list flag cannot declare a list of numbers
    { il: { name: "il", kind: list, default: [], help: "" } },
    // @ts-expect-error a switch cannot declare a number field
    { n: { name: "n", kind: bool, default: 1, help: "" } },
    // @ts-expect-error the choices must be the field's union, not more...
    { c: { name: "c", kind: choices(["a", "b", "z"]), default: "a", help: "" } },
    // @ts-expect-error ...and not fewer
    { c: { name: "c", kind: choices(["a"]), default: "a", help: "" } },
    // @ts-expect-error the default has the field's type
    { n: { name: "n", kind: int, default: "1", help: "" } },
    // @ts-expect-error null only where the field allows it
    { n: { name: "n", kind: int, default: null, help: "" } },
    // @ts-expect-error a check takes the field's type
    { n: { name: "n", kind: int, default: 1, help: "", check: (_, v: string) => v } },
    {
      n: {
        name: "n",
        kind: int,
        default: 1,
        help: "",
        // @ts-expect-error a shorthand sets a value of the field's type
        shorthand: { name: "x", value: "1", help: "" },
      },
    },
  ];
  assert.equal(mismatches.length, 10);
});

Deno.test("flag declarations: a record without every field does not type-check", () => {
  // @ts-expect-error `maybe` is missing
  const partial: Flags<Sample> = { ...ok, maybe: undefined };
  assert.equal(partial.maybe, undefined);
});
