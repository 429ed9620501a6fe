import assert from "node:assert/strict";
import type { LoadSnapshot } from "../../lib/core/types.ts";
import {
  parseGetLoad,
  parseLoads,
  parsePrometheusLoad,
  usedTokensOrUnknown,
} from "../../lib/workers/load_report.ts";

Deno.test("parseLoads: sums counts over ranks and averages token usage", () => {
  const loads = [
    {
      dp_rank: 0,
      num_running_reqs: 3,
      num_waiting_reqs: 1,
      num_waiting_uncached_tokens: 100,
      num_used_tokens: 1000,
      max_total_num_tokens: 4000,
      token_usage: 0.25,
      gen_throughput: 50.5,
      cache_hit_rate: 0.5,
    },
    {
      dp_rank: 1,
      num_running_reqs: 5,
      num_waiting_reqs: 2,
      num_waiting_uncached_tokens: 20,
      num_used_tokens: 3000,
      max_total_num_tokens: 4000,
      token_usage: 0.75,
      gen_throughput: 49.5,
      cache_hit_rate: 0.7,
    },
  ];
  const s = parseLoads({ timestamp: "x", dp_rank_count: 2, loads });
  assert.ok(s);
  assert.equal(s.runningRequests, 8);
  assert.equal(s.waitingRequests, 3);
  assert.equal(s.waitingUncachedTokens, 120);
  assert.equal(s.usedTokens, 4000);
  assert.equal(s.maxTokens, 8000);
  assert.equal(s.tokenUsage, 0.5);
  assert.equal(s.genThroughput, 100);
  assert.ok(Math.abs(s.cacheHitRate! - 0.6) < 1e-9);
  assert.equal(s.source, "loads");
  assert.deepEqual(s.details, loads);
});

Deno.test("parseLoads: missing fields are unknown, and usage falls back to used/max", () => {
  const s = parseLoads({ loads: [{ num_used_tokens: 300, max_total_num_tokens: 1000 }] });
  assert.ok(s);
  assert.equal(s.runningRequests, 0);
  assert.equal(s.waitingRequests, 0);
  assert.equal(s.waitingUncachedTokens, null);
  assert.equal(s.genThroughput, null);
  assert.equal(s.cacheHitRate, null);
  assert.equal(s.tokenUsage, 0.3);

  const bare = parseLoads({ loads: [{ num_running_reqs: 2 }] });
  assert.ok(bare);
  assert.equal(bare.usedTokens, null);
  assert.equal(bare.maxTokens, null);
  assert.equal(bare.tokenUsage, 0);
});

Deno.test("parseLoads: token usage is the mean over ranks that report it", () => {
  const s = parseLoads({ loads: [{ token_usage: 0.2 }, { token_usage: 0.4 }, {}] });
  assert.ok(s);
  assert.ok(Math.abs(s.tokenUsage - 0.3) < 1e-9);
});

Deno.test("parseLoads: non-numeric values are ignored, not summed as strings", () => {
  const s = parseLoads({
    loads: [{ num_running_reqs: "7" }, { num_running_reqs: 2 }, { num_running_reqs: NaN }],
  });
  assert.ok(s);
  assert.equal(s.runningRequests, 2);
});

Deno.test("parseLoads: null for shapes that are not a load report", () => {
  const bad: unknown[] = [
    null,
    undefined,
    42,
    "loads",
    [],
    [{ num_running_reqs: 1 }],
    {},
    { loads: null },
    { loads: {} },
    { loads: [] },
    { loads: [1, "two", null, []] },
  ];
  for (const b of bad) assert.equal(parseLoads(b), null, JSON.stringify(b));
});

Deno.test("parseGetLoad: sglang's legacy array, running = num_reqs minus waiting", () => {
  const body = [
    { dp_rank: 0, num_reqs: 5, num_waiting_reqs: 2, num_tokens: 700 },
    { dp_rank: 1, num_reqs: 3, num_waiting_reqs: 0, num_tokens: 300 },
  ];
  const s = parseGetLoad(body);
  assert.ok(s);
  assert.equal(s.runningRequests, 6);
  assert.equal(s.waitingRequests, 2);
  assert.equal(s.usedTokens, 1000);
  assert.equal(s.maxTokens, null);
  assert.equal(s.source, "get_load");
  assert.deepEqual(s.details, body);
});

Deno.test("parseGetLoad: a single object is one rank; null without num_reqs", () => {
  const s = parseGetLoad({ num_reqs: 4, num_waiting_reqs: 1 });
  assert.ok(s);
  assert.equal(s.runningRequests, 3);
  assert.equal(s.usedTokens, null);
  for (const b of [null, "x", [], [{}], [{ num_tokens: 5 }], { loads: [] }, [1, 2]]) {
    assert.equal(parseGetLoad(b), null, JSON.stringify(b));
  }
});

Deno.test("parseGetLoad: running never goes negative", () => {
  const s = parseGetLoad([{ num_reqs: 1, num_waiting_reqs: 4 }]);
  assert.ok(s);
  assert.equal(s.runningRequests, 0);
  assert.equal(s.waitingRequests, 4);
});

const SGLANG_COLON = `# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",dp_rank="0"} 0.2
sglang:token_usage{model_name="m",dp_rank="1"} 0.6
sglang:num_running_reqs{model_name="m",dp_rank="0"} 3
sglang:num_running_reqs{model_name="m",dp_rank="1"} 4
sglang:num_queue_reqs{model_name="m",dp_rank="0"} 1
sglang:num_queue_reqs{model_name="m",dp_rank="1"} 2
sglang:num_used_tokens{model_name="m"} 1234
sglang:max_total_num_tokens{model_name="m"} 10000
sglang:gen_throughput{model_name="m"} 88.5
sglang:cache_hit_rate{model_name="m"} 0.25
`;

Deno.test("parsePrometheusLoad: sglang: gauges, summed over label sets", () => {
  const s = parsePrometheusLoad(SGLANG_COLON);
  assert.ok(s);
  assert.equal(s.runningRequests, 7);
  assert.equal(s.waitingRequests, 3);
  assert.ok(Math.abs(s.tokenUsage - 0.4) < 1e-9);
  assert.equal(s.usedTokens, 1234);
  assert.equal(s.maxTokens, 10000);
  assert.equal(s.genThroughput, 88.5);
  assert.equal(s.cacheHitRate, 0.25);
  assert.equal(s.source, "metrics");
});

Deno.test("parsePrometheusLoad: sglang_ prefix, unlabelled samples, timestamps, CRLF", () => {
  const text = [
    "# TYPE sglang_token_usage gauge",
    "sglang_token_usage 0.5 1700000000000",
    "sglang_num_running_reqs 2",
    "sglang_num_queue_reqs 9",
    "",
  ].join("\r\n");
  const s = parsePrometheusLoad(text);
  assert.ok(s);
  assert.equal(s.tokenUsage, 0.5);
  assert.equal(s.runningRequests, 2);
  assert.equal(s.waitingRequests, 9);
  assert.equal(s.usedTokens, null);
});

Deno.test("parsePrometheusLoad: label values with spaces do not break the value", () => {
  const s = parsePrometheusLoad(
    'sglang:token_usage{model_name="my model v2"} 0.75\nsglang:num_running_reqs{x="a b"} 6\n',
  );
  assert.ok(s);
  assert.equal(s.tokenUsage, 0.75);
  assert.equal(s.runningRequests, 6);
});

Deno.test("parsePrometheusLoad: vLLM with kv_cache_usage_perc or gpu_cache_usage_perc", () => {
  for (const gauge of ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]) {
    const text = `# HELP ${gauge} KV usage
${gauge}{engine="0",model_name="m"} 0.3
${gauge}{engine="1",model_name="m"} 0.5
vllm:num_requests_running{engine="0",model_name="m"} 4
vllm:num_requests_running{engine="1",model_name="m"} 1
vllm:num_requests_waiting{model_name="m"} 6
vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.9
`;
    const s = parsePrometheusLoad(text);
    assert.ok(s, gauge);
    assert.ok(Math.abs(s.tokenUsage - 0.4) < 1e-9, gauge);
    assert.equal(s.runningRequests, 5, gauge);
    assert.equal(s.waitingRequests, 6, gauge);
    assert.equal(s.cacheHitRate, 0.9, gauge);
    assert.equal(s.usedTokens, null, gauge);
  }
});

Deno.test("parsePrometheusLoad: null for text that is not an engine's load", () => {
  const texts = [
    "",
    "# only comments\n# HELP sglang:token_usage x\n",
    "process_cpu_seconds_total 12.5\ngo_goroutines 8\n",
    "sglang:num_running_reqs 3\n", // no token_usage gauge
    "vllm:num_requests_running 3\n", // no cache usage gauge
    "<html>not metrics</html>",
    '{"loads":[]}',
  ];
  for (const t of texts) assert.equal(parsePrometheusLoad(t), null, t);
});

Deno.test("usedTokensOrUnknown: used tokens, else -1", () => {
  const s = parseLoads({ loads: [{ num_used_tokens: 10 }, { num_used_tokens: 5 }] });
  assert.equal(usedTokensOrUnknown(s), 15);
  assert.equal(usedTokensOrUnknown(parseLoads({ loads: [{ num_running_reqs: 1 }] })), -1);
  assert.equal(usedTokensOrUnknown(null), -1);
  const zero = { ...s!, usedTokens: 0 } satisfies LoadSnapshot;
  assert.equal(usedTokensOrUnknown(zero), 0);
});
