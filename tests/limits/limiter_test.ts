/**
 * The tenant limiter under fake time: reserve once, deny with Retry-After, refill, model rules
 * (exact beats prefix, the longest prefix wins, rules never stack), settle to the real usage,
 * free what a client that left did not use, keep the estimate when nothing is known, peers'
 * consumption taken out of the same buckets, idle scopes dropped.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../lib/core/clock.ts";
import type { LimitsFile } from "../../lib/limits/config.ts";
import { Charge, parseScope, scopeId, TenantLimiter } from "../../lib/limits/limiter.ts";
import { PolicySet } from "../../lib/limits/policy.ts";
import { Metrics } from "../../lib/metrics/metrics.ts";

const lim = (tokensPerMinute: number, requestsPerMinute: number) => ({
  tokensPerMinute,
  requestsPerMinute,
});

function file(): LimitsFile {
  return {
    defaultPolicy: { tenantKey: null, limits: lim(600, 60), modelRules: [] },
    tenants: [{
      tenantKey: "auth:red",
      limits: lim(10_000, 1000),
      modelRules: [
        { ruleId: "gpt4", matcher: { type: "exact", value: "gpt-4" }, limits: lim(100, 10) },
        { ruleId: "gpt", matcher: { type: "prefix", value: "gpt-" }, limits: lim(200, 20) },
        { ruleId: "gpt4x", matcher: { type: "prefix", value: "gpt-4-" }, limits: lim(300, 30) },
      ],
    }],
  };
}

function limiter() {
  const clock = new FakeClock();
  const metrics = new Metrics();
  return { l: new TenantLimiter(new PolicySet(file()), clock, metrics), clock, metrics };
}

const charge = (r: Charge | number): Charge => {
  assert.ok(r instanceof Charge, `expected admission, got a denial (retry ${r})`);
  return r;
};

Deno.test("limiter: within the budget admitted, past it denied with the seconds to wait", () => {
  const { l } = limiter();
  charge(l.reserve("ip:10.0.0.1", null, 400));
  // 200 left; 300 more needs 100 tokens, at 10 a second: 10 s.
  assert.equal(l.reserve("ip:10.0.0.1", null, 300), 10);
  // Another tenant has its own buckets (from the default policy).
  charge(l.reserve("ip:10.0.0.2", null, 300));
  // An ask above the capacity can never pass: no wait would do.
  assert.equal(l.reserve("ip:10.0.0.3", null, 601), Infinity);
});

Deno.test("limiter: requests per minute hold whatever the tokens, and refill a sixtieth a second", () => {
  const { l, clock } = limiter();
  for (let i = 0; i < 60; i++) charge(l.reserve("anonymous", null, 1)).final(1, 0);
  assert.equal(l.reserve("anonymous", null, 1), 1);
  clock.advance(999);
  assert.equal(l.reserve("anonymous", null, 1), 1);
  clock.advance(1);
  charge(l.reserve("anonymous", null, 1));
  assert.equal(l.reserve("anonymous", null, 1), 1);
});

Deno.test("limiter: exact beats prefix, the longest prefix wins, one rule per request", () => {
  const { l } = limiter();
  const rule = (model: string) => {
    const before = new Map(
      ["gpt4", "gpt", "gpt4x"].map((r) => [r, l.available(scopeId("auth:red", r))!.tokens]),
    );
    charge(l.reserve("auth:red", model, 5));
    return ["gpt4", "gpt", "gpt4x"].filter((r) =>
      l.available(scopeId("auth:red", r))!.tokens !== before.get(r)
    );
  };
  assert.deepEqual(rule("gpt-4"), ["gpt4"]);
  assert.deepEqual(rule("gpt-4-turbo"), ["gpt4x"]);
  assert.deepEqual(rule("gpt-3.5"), ["gpt"]);
  assert.deepEqual(rule("llama"), []);
  // The tenant's own budget took all four.
  assert.equal(l.available(scopeId("auth:red", null))!.tokens, 10_000 - 20);
});

Deno.test("limiter: a rule's budget denies though the tenant's own has plenty", () => {
  const { l } = limiter();
  charge(l.reserve("auth:red", "gpt-4", 80));
  assert.ok(typeof l.reserve("auth:red", "gpt-4", 30) === "number");
  charge(l.reserve("auth:red", "claude", 30));
});

Deno.test("limiter: settled to the real usage, debt included, refund capped at the capacity", async () => {
  const { l, metrics } = limiter();
  const own = scopeId("ip:1.2.3.4", null);
  const c = charge(l.reserve("ip:1.2.3.4", null, 100));
  assert.equal(l.open, 1);
  c.final(120, 880); // 1000 used: 400 more than the 600 capacity
  assert.equal(l.available(own)!.tokens, -400);
  assert.equal(l.open, 0);
  c.final(1, 1); // resolved once
  c.finish();
  assert.equal(l.available(own)!.tokens, -400);
  assert.equal(l.reserve("ip:1.2.3.4", null, 10), 41, "the debt is waited out");
  const d = charge(l.reserve("ip:9.9.9.9", null, 500));
  d.final(20, 0); // 480 refunded
  assert.equal(l.available(scopeId("ip:9.9.9.9", null))!.tokens, 580);
  const text = await metrics.render();
  assert.match(text, /smg_tenant_rate_limit_total\{result="allowed"\} 2/);
  assert.match(text, /smg_tenant_rate_limit_total\{result="rejected"\} 1/);
  assert.match(text, /smg_tenant_rate_limit_tokens_total\{kind="reserved"\} 600/);
  assert.match(text, /smg_tenant_rate_limit_tokens_total\{kind="settled"\} 1020/);
  assert.match(text, /smg_tenant_rate_limit_reservations 0/);
});

Deno.test("limiter: a client that left is charged what it was delivered, the rest freed", () => {
  const { l } = limiter();
  const own = scopeId("anonymous", null);
  const c = charge(l.reserve("anonymous", null, 50));
  let delivered = { prompt: 0, completion: 0 };
  c.live(() => delivered);
  delivered = { prompt: 0, completion: 7 };
  c.finish();
  assert.equal(l.available(own)!.tokens, 600 - 57, "the estimate for the prompt, 7 streamed");
  const g = charge(l.reserve("anonymous", null, 50));
  g.live(() => ({ prompt: 40, completion: 3 }));
  g.finish();
  assert.equal(l.available(own)!.tokens, 600 - 57 - 43, "a known prompt replaces the estimate");
  assert.equal(l.open, 0);
});

Deno.test("limiter: with nothing known (an error, no usage) the estimate stays charged", () => {
  const { l } = limiter();
  const c = charge(l.reserve("anonymous", null, 50));
  c.finish();
  assert.equal(l.available(scopeId("anonymous", null))!.tokens, 550);
  assert.equal(l.available(scopeId("anonymous", null))!.requests, 59);
});

Deno.test("limiter: peers' consumption is taken from the same buckets, and local charges heard", () => {
  const { l } = limiter();
  const heard: [string, number, number][] = [];
  l.onCharge = (s, t, r) => heard.push([s, t, r]);
  const c = charge(l.reserve("auth:red", "gpt-4", 10));
  c.final(10, 5);
  assert.deepEqual(heard, [
    ["auth%3Ared", 10, 1],
    ["auth%3Ared/gpt4", 10, 1],
    ["auth%3Ared", 5, 0],
    ["auth%3Ared/gpt4", 5, 0],
  ]);
  l.applyRemote("auth%3Ared/gpt4", 90, 2);
  assert.deepEqual(l.available("auth%3Ared/gpt4"), { tokens: -5, requests: 7 });
  l.applyRemote("auth%3Ablue", 100, 1); // a tenant not seen here: the default policy's buckets
  assert.deepEqual(l.available("auth%3Ablue"), { tokens: 500, requests: 59 });
  l.applyRemote("auth%3Ared/nope", 1, 1); // a rule this router does not have: ignored
  assert.equal(l.available("auth%3Ared/nope"), null);
});

Deno.test("limiter: scope ids never hold ':' and read back", () => {
  for (const [t, r] of [["ip:::1", null], ["header:a/b c", "x.y-z"], ["anonymous", "r"]]) {
    const id = scopeId(t!, r);
    assert.ok(!id.includes(":"), id);
    assert.deepEqual(parseScope(id), { tenant: t, ruleId: r });
  }
  assert.equal(parseScope("a/b/c"), null);
  assert.equal(parseScope("%E0%A4%A"), null);
});

Deno.test("limiter: scopes back to full with nothing open are dropped as the table grows", () => {
  const { l, clock } = limiter();
  const held = charge(l.reserve("ip:10.9.9.9", null, 1)); // open: kept
  for (let i = 0; i < 1023; i++) {
    charge(l.reserve(`ip:10.0.${i >> 8}.${i & 255}`, null, 1)).finish();
  }
  assert.equal(l.scopes, 1024);
  clock.advance(60_000); // all refilled
  for (let i = 0; i < 10; i++) charge(l.reserve(`ip:10.1.0.${i}`, null, 1)).finish();
  assert.equal(l.scopes, 11, "the full ones went, the one holding a reservation stayed");
  held.final(1, 0);
  assert.equal(l.open, 0);
  assert.equal(l.available(scopeId("ip:10.9.9.9", null))!.requests, 60);
});
