import assert from "node:assert/strict";
import { createLogger, type LoggerOptions, parseFilter } from "../../lib/core/log.ts";

function capture(opts: LoggerOptions = {}) {
  const lines: string[] = [];
  const log = createLogger({ ...opts, sink: (l) => lines.push(l) });
  return { log, lines };
}

Deno.test("parseFilter: base level and per-module directives", () => {
  const d = parseFilter("warn,proxy=debug, Health=TRACE ,,bogus,x=loud", "info");
  assert.equal(d.base, 3); // warn
  assert.deepEqual([...d.modules], [["proxy", 1], ["health", 0]]);
  assert.equal(parseFilter(undefined, "error").base, 4);
  assert.equal(parseFilter("", "debug").base, 1);
  assert.equal(parseFilter("nonsense", "info").base, 2);
});

Deno.test("logger: the level filters lines", () => {
  const { log, lines } = capture({ level: "warn" });
  log.trace("t");
  log.debug("d");
  log.info("i");
  log.warn("w");
  log.error("e");
  assert.deepEqual(lines.map((l) => /level=(\w+)/.exec(l)?.[1]), ["warn", "error"]);
});

Deno.test("logger: enabled() agrees with what is written", () => {
  const { log } = capture({ level: "info" });
  const table = [["trace", false], ["debug", false], ["info", true], ["warn", true], [
    "error",
    true,
  ]] as const;
  for (const [level, want] of table) assert.equal(log.enabled(level), want, level);
});

Deno.test("logger: a filter's base directive overrides --log-level", () => {
  const { log, lines } = capture({ level: "info", filter: "error" });
  log.warn("hidden");
  log.error("shown");
  assert.equal(lines.length, 1);
  assert.match(lines[0], /msg=shown/);
});

Deno.test("logger: module directives apply to children with that module", () => {
  const { log, lines } = capture({ level: "info", filter: "proxy=debug,health=error" });
  const proxy = log.child({ module: "proxy" });
  const health = log.child({ module: "health" });
  const other = log.child({ module: "registry" });
  proxy.debug("p-debug");
  proxy.trace("p-trace");
  health.warn("h-warn");
  health.error("h-error");
  other.debug("o-debug");
  other.info("o-info");
  log.debug("root-debug");
  assert.deepEqual(lines.map((l) => /msg=(\S+)/.exec(l)?.[1]), ["p-debug", "h-error", "o-info"]);
  assert.equal(proxy.enabled("debug"), true);
  assert.equal(health.enabled("warn"), false);
  // A grandchild keeps the module and its directive.
  proxy.child({ request_id: "r1" }).debug("grandchild");
  assert.match(lines.at(-1)!, /msg=grandchild module=proxy request_id=r1/);
});

Deno.test("logger: logfmt lines quote what needs quoting", () => {
  const { log, lines } = capture();
  log.child({ module: "proxy" }).info("worker failed", {
    url: "http://a:1",
    status: 502,
    ok: false,
    note: 'said "no"',
    err: new Error("connection refused"),
    skipped: undefined,
    obj: { a: 1 },
  });
  const line = lines[0];
  assert.match(line, /^ts=\d{4}-\d\d-\d\dT\S+Z level=info msg="worker failed" /);
  assert.match(line, / module=proxy url=http:\/\/a:1 status=502 ok=false /);
  assert.match(line, / note="said \\"no\\"" /);
  assert.match(line, / err="connection refused" /);
  assert.doesNotMatch(line, /skipped/);
  assert.match(line, / obj="\{\\"a\\":1\}"$/);
  // A newline in a message cannot forge a second line.
  log.warn("first\nlevel=error msg=forged");
  assert.equal(lines.length, 2);
  assert.ok(!lines[1].includes("\n"));
});

Deno.test("logger: JSON lines carry ts, level, msg and every field", () => {
  const { log, lines } = capture({ json: true });
  log.child({ module: "health", worker: "http://a:1" }).warn("probe failed", {
    attempt: 2,
    err: new Error("timeout"),
  });
  assert.equal(lines.length, 1);
  const o = JSON.parse(lines[0]);
  assert.equal(o.level, "warn");
  assert.equal(o.msg, "probe failed");
  assert.equal(o.module, "health");
  assert.equal(o.worker, "http://a:1");
  assert.equal(o.attempt, 2);
  assert.equal(o.err, "timeout");
  assert.ok(!Number.isNaN(Date.parse(o.ts)), o.ts);
});

Deno.test("logger: call fields override the child's fields on that line only", () => {
  const { log, lines } = capture({ json: true });
  const c = log.child({ worker: "a" });
  c.info("one", { worker: "b" });
  c.info("two");
  assert.deepEqual(lines.map((l) => JSON.parse(l).worker), ["b", "a"]);
});

Deno.test("logger: SMG's targets work as its docs write them", () => {
  const { log, lines } = capture({
    level: "info",
    filter: "warn,smg=info,smg_mesh=debug,smg::mesh=debug,smg::mesh_discovery=debug",
  });
  log.child({ module: "mesh" }).debug("mesh detail");
  log.child({ module: "proxy" }).info("proxy info");
  log.child({ module: "proxy" }).debug("proxy detail");
  assert.deepEqual(lines.map((l) => l.match(/msg="([^"]+)"/)?.[1]), ["mesh detail", "proxy info"]);
});
