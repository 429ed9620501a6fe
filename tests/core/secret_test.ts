/**
 * Secret comparison: right answers for every kind of near miss, and a running time that does
 * not depend on how much of a guess is right (counted in characters examined, not timed).
 */

import assert from "node:assert/strict";
import { bearerToken, secretEquals } from "../../lib/core/secret.ts";

Deno.test("secretEquals: equal only when equal, whatever the near miss", () => {
  const key = "sk-0123456789abcdef";
  assert.ok(secretEquals(key, key));
  assert.ok(secretEquals(key, `${key}`.slice(0)));
  for (
    const miss of [
      "",
      "s",
      "sk-0123456789abcde", // a prefix
      "sk-0123456789abcdeF", // last character
      "Sk-0123456789abcdef", // first character
      "sk-0123456789abcdefg", // longer
      `${key}${key}`, // the key twice: the index wraps, the length must still differ
      "x".repeat(key.length),
    ]
  ) {
    assert.equal(secretEquals(key, miss), false, JSON.stringify(miss));
  }
  assert.ok(secretEquals("", ""));
  assert.equal(secretEquals("", "a"), false);
  // Non-ASCII keys compare by code unit, as `===` did.
  assert.ok(secretEquals("clé-ü", "clé-ü"));
  assert.equal(secretEquals("clé-ü", "cle-u"), false);
});

Deno.test("secretEquals: looks at every character of the guess, right or wrong", () => {
  // Count the characters read from the guess: the same for a guess wrong at its first
  // character as for one wrong at its last, so the time tells nothing of the key.
  const key = "sk-0123456789abcdef";
  const counted = (guess: string) => {
    let reads = 0;
    const spy = new Proxy(new String(guess), {
      get(target, prop) {
        if (prop === "charCodeAt") {
          return (i: number) => (reads++, target.charCodeAt(i));
        }
        const v = Reflect.get(target, prop);
        return typeof v === "function" ? v.bind(target) : v;
      },
    }) as unknown as string;
    secretEquals(key, spy);
    return reads;
  };
  const early = counted("Xk-0123456789abcdef");
  const late = counted("sk-0123456789abcdeX");
  assert.equal(early, key.length);
  assert.equal(late, key.length);
  assert.equal(counted("X"), 1, "a short guess costs its own length only");
});

Deno.test("bearerToken: the token of a Bearer credential, scheme in any case", () => {
  assert.equal(bearerToken("Bearer k1"), "k1");
  assert.equal(bearerToken("bearer k1"), "k1");
  assert.equal(bearerToken("BEARER k1"), "k1");
  assert.equal(bearerToken("Bearer   k1"), "k1");
  assert.equal(bearerToken("Bearer a:b c"), "a:b c");
  for (const bad of [null, "", "Basic k1", "Bearerk1", "Bearer", "Bearer ", "Bearer    ", "k1"]) {
    assert.equal(bearerToken(bad), null, JSON.stringify(bad));
  }
});
