/** The tenant-rate-limit file: SMG's schema and checks, each problem naming file, line and key. */

import assert from "node:assert/strict";
import { loadLimits, parseLimits } from "../../lib/limits/config.ts";
import { ConfigError } from "../../lib/core/errors.ts";

const GOOD = `default_policy:
  tokens_per_minute: 1000
  requests_per_minute: 60
tenants:
  - tenant_key: auth:team-red
    tokens_per_minute: 5000
    requests_per_minute: 300
    model_rules:
      - rule_id: gpt4
        matcher: { type: exact, value: gpt-4 }
        tokens_per_minute: 50
        requests_per_minute: 5
      - rule_id: llama.all
        matcher:
          type: prefix
          value: llama-
        tokens_per_minute: 70
        requests_per_minute: 7
  - tenant_key: ip:10.0.0.1
    tokens_per_minute: 10
    requests_per_minute: 1
`;

const DEFAULT_TWICE = "default_policy:\n  tokens_per_minute: 1\n  tokens_per_minute: 2\n";

function problem(text: string, trust = false): string {
  try {
    parseLimits(text, "/etc/smg/limits.yaml", trust);
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    return e.message;
  }
  assert.fail("expected the file to be refused");
}

Deno.test("limits file: SMG's schema is read into policies and rules", () => {
  const f = parseLimits(GOOD, "limits.yaml", false);
  assert.deepEqual(f.defaultPolicy, {
    tenantKey: null,
    limits: { tokensPerMinute: 1000, requestsPerMinute: 60 },
    modelRules: [],
  });
  assert.equal(f.tenants.length, 2);
  assert.equal(f.tenants[0].tenantKey, "auth:team-red");
  assert.deepEqual(f.tenants[0].modelRules.map((r) => [r.ruleId, r.matcher.type, r.limits]), [
    ["gpt4", "exact", { tokensPerMinute: 50, requestsPerMinute: 5 }],
    ["llama.all", "prefix", { tokensPerMinute: 70, requestsPerMinute: 7 }],
  ]);
  assert.deepEqual(parseLimits(GOOD.split("tenants:")[0], "x", false).tenants, []);
});

Deno.test("limits file: each problem names the file, the line and the key", () => {
  const cases: [string, string, RegExp][] = [
    [
      "unknown field",
      GOOD.replace("    requests_per_minute: 300", "    requests_per_minut: 300"),
      /^--tenant-rate-limit-config \/etc\/smg\/limits\.yaml: line 7: tenants\[0\]\.requests_per_minut: unknown field/,
    ],
    ["misspelled top-level", GOOD.replace("tenants:", "tenant:"), /line 4: tenant: unknown field/],
    [
      "zero tokens",
      GOOD.replace("tokens_per_minute: 1000", "tokens_per_minute: 0"),
      /line 2: default_policy\.tokens_per_minute: must be a whole number > 0/,
    ],
    [
      "zero rule requests",
      GOOD.replace("requests_per_minute: 5\n", "requests_per_minute: 0\n"),
      /line 12: tenants\[0\]\.model_rules\[0\]\.requests_per_minute: must be/,
    ],
    [
      "missing requests",
      GOOD.replace("  requests_per_minute: 60\n", ""),
      /line 2: default_policy\.requests_per_minute: is required/,
    ],
    [
      "fractional",
      GOOD.replace("tokens_per_minute: 10\n", "tokens_per_minute: 2.5\n"),
      /line 20: tenants\[1\].tokens_per_minute: must be a whole number > 0 \(got 2\.5\)/,
    ],
    [
      "tenant key on the default",
      GOOD.replace("default_policy:\n", "default_policy:\n  tenant_key: auth:x\n"),
      /line 2: default_policy\.tenant_key: not allowed on the default/,
    ],
    [
      "missing tenant key",
      GOOD.replace("  - tenant_key: ip:10.0.0.1\n    tokens", "  - tokens"),
      /line 19: tenants\[1\].tenant_key: is required/,
    ],
    [
      "bare tenant id",
      GOOD.replace("auth:team-red", "team-red"),
      /line 5: tenants\[0\]\.tenant_key: 'team-red' is not a tenant key/,
    ],
    [
      "non-canonical address",
      GOOD.replace("ip:10.0.0.1", "ip:010.0.0.1"),
      /line 19: tenants\[1\]\.tenant_key: 'ip:010\.0\.0\.1' is not a tenant key/,
    ],
    [
      "padded key",
      GOOD.replace("tenant_key: auth:team-red", "tenant_key: ' auth:team-red'"),
      /tenants\[0\]\.tenant_key: ' auth:team-red' has surrounding whitespace/,
    ],
    [
      "duplicate tenant",
      GOOD.replace("ip:10.0.0.1", "auth:team-red"),
      /line 19: tenants\[1\]\.tenant_key: duplicate 'auth:team-red'/,
    ],
    [
      "header key without trust",
      GOOD.replace("ip:10.0.0.1", "header:team-blue"),
      /tenants\[1\]\.tenant_key: 'header:team-blue' can never match without --trust-tenant-header/,
    ],
    [
      "bad rule id",
      GOOD.replace("rule_id: gpt4", "rule_id: 'gpt 4'"),
      /line 9: tenants\[0\]\.model_rules\[0\]\.rule_id: 'gpt 4' must match/,
    ],
    [
      "duplicate rule id",
      GOOD.replace("rule_id: llama.all", "rule_id: gpt4"),
      /line 13: tenants\[0\]\.model_rules\[1\]: duplicate rule_id 'gpt4'/,
    ],
    [
      "duplicate matcher",
      GOOD.replace("type: prefix\n          value: llama-", "type: exact\n          value: gpt-4"),
      /line 13: tenants\[0\]\.model_rules\[1\]: same matcher as rule 'gpt4'/,
    ],
    [
      "unknown matcher type",
      GOOD.replace("type: prefix", "type: regex"),
      /line 15: tenants\[0\]\.model_rules\[1\]\.matcher\.type: 'regex': expected exact or prefix/,
    ],
    [
      "empty matcher",
      GOOD.replace("value: gpt-4", "value: ''"),
      /tenants\[0\]\.model_rules\[0\]\.matcher\.value: must not be empty/,
    ],
    [
      "not YAML",
      "default_policy: [1, 2\n",
      /^--tenant-rate-limit-config \/etc.*: line \d+: Flow sequence/,
    ],
    ["a key twice", DEFAULT_TWICE, /line 3: Map keys must be unique/],
    ["not a mapping", "- 1\n- 2\n", /: line 1: \(top level\): expected a mapping/],
  ];
  for (const [what, text, re] of cases) assert.match(problem(text), re, what);
  // With the header trusted, a header: key is fine.
  parseLimits(GOOD.replace("ip:10.0.0.1", "header:team-blue"), "x", true);
});

Deno.test("limits file: an unreadable file names the flag and the path", () => {
  assert.throws(
    () => loadLimits("/nonexistent/limits.yaml", false),
    /^ConfigError: --tenant-rate-limit-config: cannot read '\/nonexistent\/limits\.yaml'/,
  );
  const path = Deno.makeTempFileSync({ dir: "/tmp", suffix: ".yaml" });
  try {
    Deno.writeTextFileSync(
      path,
      GOOD.replace("requests_per_minute: 60", "requests_per_minute: -1"),
    );
    assert.throws(() => loadLimits(path, false), new RegExp(`${path}: line 3: default_policy`));
  } finally {
    Deno.removeSync(path);
  }
});
