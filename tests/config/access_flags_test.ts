/**
 * The access flags: `--control-plane-api-keys id:name:role:key` (SMG's format and roles, every
 * refusal without the secret in it) and `--cors-allowed-origins` (origins as browsers send
 * them).
 */

import assert from "node:assert/strict";
import { normalizeOrigin } from "../../lib/config/access_flags.ts";
import { check, refused } from "../support/config.ts";

const FLAG = "--control-plane-api-keys";

Deno.test("--control-plane-api-keys: id:name:role:key, repeatable, role in any case", () => {
  const c = check([
    FLAG,
    "ops:Operations:admin:k-1",
    "dash:Dash board:USER:k:with:colons",
    FLAG,
    "ci:CI:Admin:k-3",
  ]);
  assert.deepEqual(c.controlPlaneApiKeys, [
    { id: "ops", name: "Operations", role: "admin", key: "k-1" },
    { id: "dash", name: "Dash board", role: "user", key: "k:with:colons" },
    { id: "ci", name: "CI", role: "admin", key: "k-3" },
  ]);
  assert.deepEqual(check([]).controlPlaneApiKeys, []);
  // A name may be empty (SMG's is free text); id, role and key may not.
  assert.equal(check([FLAG, "ops::admin:k"]).controlPlaneApiKeys[0].name, "");
});

Deno.test("--control-plane-api-keys: malformed values are refused without showing the key", () => {
  const secret = "s3cret-value";
  const cases: [string, RegExp][] = [
    [
      secret,
      /^--control-plane-api-keys: invalid value \(not shown: it may hold a key\); expected id:name:role:key/,
    ],
    [`ops:admin:${secret}`, /not shown: it may hold a key/],
    [
      `ops:Ops:superuser:${secret}`,
      /^--control-plane-api-keys: invalid value 'ops:Ops:superuser:…'; role must be admin or user$/,
    ],
    [
      `:Ops:admin:${secret}`,
      /^--control-plane-api-keys: invalid value ':Ops:admin:…'; the id is empty/,
    ],
    [
      "ops:Ops:admin:",
      /^--control-plane-api-keys: invalid value 'ops:Ops:admin:'; the key is empty$/,
    ],
    ["ops:Ops:admin:   ", /the key is empty$/],
  ];
  for (const [value, want] of cases) {
    refused([FLAG, value], want);
    try {
      check([FLAG, value]);
    } catch (e) {
      assert.ok(!(e as Error).message.includes(secret), (e as Error).message);
    }
  }
});

Deno.test("--control-plane-api-keys: each id and each key once", () => {
  refused(
    [FLAG, "a:A:admin:k1", "a:B:user:k2"],
    /^--control-plane-api-keys: invalid value 'a:…'; each id may appear once$/,
  );
  refused(
    [FLAG, "a:A:admin:k1", "b:B:user:k1"],
    /^--control-plane-api-keys: invalid value 'b:B:user:…'; its key is already another id's$/,
  );
});

Deno.test("--cors-allowed-origins: origins as browsers send them; '*' is any", () => {
  const o = (...args: string[]) => check(["--cors-allowed-origins", ...args]).corsAllowedOrigins;
  assert.deepEqual(
    o("https://App.Example.com:443/", "http://localhost:3000", "http://127.0.0.1:80"),
    [
      "https://app.example.com",
      "http://localhost:3000",
      "http://127.0.0.1",
    ],
  );
  assert.deepEqual(o("chrome-extension://ABCDEF"), ["chrome-extension://abcdef"]);
  assert.deepEqual(o("*"), [], "the default: any origin");
  assert.deepEqual(check([]).corsAllowedOrigins, []);
  refused(
    ["--cors-allowed-origins", "*", "https://a.example"],
    /'\*' \(any origin\) cannot be listed with other origins$/,
  );
  for (const bad of ["https://a.example/app", "a.example", "https://a.example?x=1", "null", ""]) {
    refused(
      ["--cors-allowed-origins", bad],
      /^--cors-allowed-origins: invalid value .*; expected an origin such as https:\/\/app\.example\.com \(no path\)$/,
    );
  }
  assert.equal(normalizeOrigin("HTTPS://a.example"), "https://a.example");
  assert.equal(normalizeOrigin("https://[::1]:8443"), "https://[::1]:8443");
});
