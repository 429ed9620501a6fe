import assert from "node:assert/strict";
import { PassthroughPolicy } from "../../lib/policies/passthrough.ts";
import { deps, request, view, views } from "../../support/policies.ts";

Deno.test("passthrough: always the first candidate", () => {
  const p = new PassthroughPolicy(deps());
  const cands = views(3);
  for (let i = 0; i < 10; i++) assert.equal(p.select(cands, request(`t${i}`)), cands[0]);
  // When the first is not a candidate any more, the next in order gets the traffic.
  assert.equal(p.select(cands.slice(1), request()), cands[1]);
  assert.equal(p.select([], request()), null);
});

Deno.test("passthrough: one worker is the intended setup and logs nothing", () => {
  const d = deps();
  const p = new PassthroughPolicy(d);
  for (let i = 0; i < 5; i++) p.select([view("only")], request());
  assert.deepEqual(d.lines, []);
});

Deno.test("passthrough: warns once when it sees more than one candidate", () => {
  const d = deps();
  const p = new PassthroughPolicy(d);
  for (let i = 0; i < 20; i++) p.select(views(2 + (i % 3)), request());
  assert.equal(d.lines.length, 1);
  const line = JSON.parse(d.lines[0]);
  assert.equal(line.level, "warn");
  assert.match(line.msg, /passthrough is meant for one worker/);
  assert.equal(line.candidates, 2);
});

Deno.test("passthrough: each instance warns for itself", () => {
  const d = deps();
  new PassthroughPolicy(d).select(views(2), request());
  new PassthroughPolicy(d).select(views(2), request());
  assert.equal(d.lines.length, 2);
});
