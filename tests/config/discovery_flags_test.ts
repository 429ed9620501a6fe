/** Service-discovery flags: SMG's names and defaults, selector parsing, and the refusals. */

import assert from "node:assert/strict";
import { check, refused } from "../support/config.ts";

Deno.test("discovery flags: SMG's names and defaults; selectors as pairs, several in one argument", () => {
  const off = check([]).discovery;
  assert.equal(off.enabled, false);
  assert.equal(off.port, 80);
  assert.equal(off.namespace, null);
  assert.equal(off.modelIdFrom, null);
  const d = check([
    "--service-discovery",
    "--selector",
    "app=sglang tier=gpu,zone=a",
    "app.kubernetes.io/component=worker",
    "--service-discovery-port",
    "8000",
    "--service-discovery-namespace",
    "inference",
    "--model-id-from",
    "label:model",
  ]).discovery;
  assert.equal(d.enabled, true);
  assert.deepEqual(d.selector, {
    app: "sglang",
    tier: "gpu",
    zone: "a",
    "app.kubernetes.io/component": "worker",
  });
  assert.equal(d.port, 8000);
  assert.equal(d.namespace, "inference");
  assert.deepEqual(d.modelIdFrom, { from: "label", key: "model" });
  assert.deepEqual(
    check(["--service-discovery", "--selector", "a=b", "--model-id-from", "namespace"]).discovery
      .modelIdFrom,
    { from: "namespace" },
  );
  const pd = check([
    "--pd-disaggregation",
    "--service-discovery",
    "--prefill-selector",
    "role=prefill",
    "--decode-selector",
    "role=decode",
  ]).discovery;
  assert.deepEqual([pd.prefillSelector, pd.decodeSelector], [{ role: "prefill" }, {
    role: "decode",
  }]);
  const r = check([
    "--enable-mesh",
    "--mesh-advertise-host",
    "127.0.0.1",
    "--service-discovery",
    "--router-selector",
    "app.kubernetes.io/component=router",
  ]).discovery;
  assert.deepEqual(r.routerSelector, { "app.kubernetes.io/component": "router" });
  assert.deepEqual(r.selector, {}, "routers only: workers come from flags or peers");
});

Deno.test("discovery flags: what is refused, and why", () => {
  refused(["--service-discovery"], /--selector: .*required with --service-discovery/);
  refused(["--selector", "a=b"], /--selector.*needs --service-discovery/);
  refused(["--service-discovery", "--selector", "novalue"], /expected key=value/);
  refused(["--service-discovery", "--selector", "a=b c"], /expected key=value/);
  refused(["--service-discovery", "--selector", "a=b!"], /not a valid label value/);
  refused(
    ["--service-discovery", "--selector", "a=b", "--model-id-from", "pod"],
    /allowed: namespace/,
  );
  refused(
    ["--service-discovery", "--selector", "a=b", "--service-discovery-port", "0"],
    /1\.\.65535/,
  );
  refused(
    ["--service-discovery", "--selector", "a=b", "--service-discovery-namespace", " "],
    /empty/,
  );
  refused(["--service-discovery", "--router-selector", "a=b"], /--router-selector.*--enable-mesh/);
  refused(
    ["--pd-disaggregation", "--service-discovery", "--prefill-selector", "r=p"],
    /needs both/,
  );
  refused(
    ["--service-discovery", "--selector", "a=b", "--prefill-selector", "r=p"],
    /need --pd-disaggregation/,
  );
  refused(["--model-id-from", "namespace"], /needs --service-discovery/);
  refused(
    ["--enable-mesh", "--mesh-advertise-host", "127.0.0.1", "--router-selector", "a=b"],
    /--router-selector.*needs --service-discovery/,
  );
});
