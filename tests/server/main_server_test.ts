/**
 * What serves the main port, as the gateway starts it: the own front takes its client limits
 * from the config (`GatewayConfig.front`) and counts each refusal on `/metrics`, every reason's
 * series there from the start.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../lib/config/config.ts";
import { startGateway } from "../../support/gateway.ts";
import { RawClient } from "../support/raw_client.ts";
import { within } from "../../support/wait.ts";

Deno.test("main server: the own front applies the config's per-client cap and counts refusals on /metrics", async () => {
  const front = { ...defaultConfig().front, maxConnectionsPerClient: 1 };
  const gw = await startGateway([], { front });
  const port = Number(new URL(gw.url).port);
  const clients: RawClient[] = [];
  try {
    const first = await RawClient.connect(port);
    clients.push(first);
    await first.send("GET /liveness HTTP/1.1\r\nhost: gw\r\n\r\n");
    assert.equal((await first.response()).status, 200);
    const second = await RawClient.connect(port);
    clients.push(second);
    assert.ok(await within(second.closed(), "the second connection from 127.0.0.1 closed"));
    const text = await (await fetch(gw.metricsUrl)).text();
    const count = (reason: string) =>
      text.match(new RegExp(`^smg_http_front_rejected_total\\{reason="${reason}"\\} (\\d+)$`, "m"))
        ?.[1];
    assert.equal(count("per_client"), "1");
    for (const r of ["max_connections", "head_timeout", "body_timeout"]) {
      assert.equal(count(r), "0");
    }
  } finally {
    for (const c of clients) c.close();
    await gw.close();
  }
});
