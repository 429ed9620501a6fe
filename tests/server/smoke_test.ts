import assert from "node:assert/strict";
import { FakeWorker } from "../support/fake_worker.ts";
import { startGateway } from "../../support/gateway.ts";

Deno.test("smoke: chat through the gateway", async () => {
  const w = new FakeWorker();
  const g = await startGateway([w.url]);
  try {
    const res = await fetch(`${g.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "test-model", messages: [{ role: "user", content: "hi" }] }),
    });
    const body = await res.json();
    assert.equal(res.status, 200);
    assert.match(body.choices[0].message.content, /hello/);
  } finally {
    await g.close();
    await w.close();
  }
});
