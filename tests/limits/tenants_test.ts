/** Tenant keys: SMG's resolution order, canonical forms, and the key check. */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { Tenants } from "../../lib/limits/tenants.ts";
import { canonicalIp, isCanonicalTenantKey } from "../../lib/limits/tenant_key.ts";

const h = (pairs: Record<string, string>) => new Headers(pairs);

Deno.test("tenants: a tenant key names its tenant, the shared key its digest, others nothing", () => {
  const t = new Tenants({
    apiKey: "shared",
    tenantApiKeys: ["red:k1", "blue:k:2"],
    trustHeader: false,
    headerName: "x-smg-tenant-id",
  });
  assert.ok(t.keysRequired);
  assert.equal(t.authenticate("Bearer k1"), "auth:red");
  assert.equal(t.authenticate("Bearer k:2"), "auth:blue", "the key is all after the first ':'");
  const digest = createHash("sha256").update("shared").digest("hex");
  assert.equal(t.authenticate("Bearer shared"), `auth:${digest}`);
  assert.equal(t.authenticate("Bearer nope"), null);
  assert.equal(t.authenticate("k1"), null);
  assert.equal(t.authenticate(null), null);
  assert.ok(t.isSharedKey("Bearer shared"));
  assert.ok(!t.isSharedKey("Bearer k1"), "a tenant key is no admin key");
});

Deno.test("tenants: auth, then the trusted header, then the address, then anonymous", () => {
  const trusting = new Tenants({
    apiKey: null,
    tenantApiKeys: [],
    trustHeader: true,
    headerName: "x-team",
  });
  assert.ok(!trusting.keysRequired);
  assert.equal(trusting.resolve(h({ "x-team": " blue " }), "10.0.0.1", "auth:red"), "auth:red");
  assert.equal(trusting.resolve(h({ "x-team": " blue " }), "10.0.0.1", null), "header:blue");
  assert.equal(trusting.resolve(h({ "x-team": "  " }), "10.0.0.1", null), "ip:10.0.0.1");
  assert.equal(trusting.resolve(h({}), undefined, null), "anonymous");
  const strict = new Tenants({
    apiKey: null,
    tenantApiKeys: [],
    trustHeader: false,
    headerName: "x-smg-tenant-id",
  });
  assert.equal(strict.resolve(h({ "x-smg-tenant-id": "blue" }), "::1", null), "ip:::1");
  assert.equal(
    strict.resolve(h({}), "0:0:0:0:0:ffff:7f00:1", null),
    "ip:::ffff:127.0.0.1",
    "addresses in their canonical form",
  );
});

Deno.test("tenant keys: canonical forms", () => {
  for (
    const [raw, canon] of [
      ["10.0.0.1", "10.0.0.1"],
      ["010.0.0.1", null],
      ["256.0.0.1", null],
      ["[::1]", "::1"],
      ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
      ["2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"],
      ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
      ["1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"],
      ["::ffff:1.2.3.4", "::ffff:1.2.3.4"],
      ["::", "::"],
      ["1::2::3", null],
      ["1:2:3:4:5:6:7:8:9", null],
      ["example.com", null],
    ] as const
  ) assert.equal(canonicalIp(raw), canon, raw);
  for (const k of ["anonymous", "auth:x", "header:team red", "ip:10.0.0.1", "ip:2001:db8::1"]) {
    assert.ok(isCanonicalTenantKey(k), k);
  }
  for (const k of ["auth:", "header: x", "ip:2001:DB8::1", "ip:nope", "tenant:x", "Anonymous"]) {
    assert.ok(!isCanonicalTenantKey(k), k);
  }
});
