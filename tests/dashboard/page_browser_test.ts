/**
 * The status page in a real headless browser (Debian's Chromium through `puppeteer-core`; `.ci/run`
 * installs it), in front of the demo's fleet: four simulated workers behind cache_aware. The
 * page loads with no console error, lists the four workers, its numbers move when requests go
 * through the gateway, and a worker killed (the gateway probes every second) is marked within
 * two of the page's updates after the gateway saw it go. Without Chromium the test is skipped,
 * and says why.
 */

import assert from "node:assert/strict";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { parseSimWorkerArgs } from "../../lib/sim/cli.ts";
import { startSimWorker } from "../../lib/sim/worker.ts";
import { startGateway } from "../../support/gateway.ts";
import { until, within } from "../../support/wait.ts";

const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];

/** The Chromium to drive: `$CHROME_PATH`, else the first of the usual paths that exists. */
function findChromium(): string | null {
  const env = Deno.env.get("CHROME_PATH");
  for (const path of env ? [env] : CANDIDATES) {
    try {
      if (Deno.statSync(path).isFile) return path;
    } catch { /* not there */ }
  }
  return null;
}

const chromium = findChromium();
const NAME =
  "page: in Chromium, the demo's four workers, numbers that move, a killed worker marked";

/** A worker's row as the page shows it. */
interface Row {
  url: string;
  state: string;
  requests: string;
}

// What runs in the page is given as source text: these files are type-checked without the DOM.
const ROWS = `[...document.querySelectorAll("#workers tbody tr")].map((tr) => ({
  url: tr.dataset.url,
  state: tr.dataset.state,
  requests: tr.querySelectorAll("td")[7].textContent,
}))`;

/** The workers table's rows. */
const rows = (page: Page) => page.evaluate(ROWS) as Promise<Row[]>;

/** How many snapshots the page has drawn. */
const updates = (page: Page) =>
  page.evaluate("Number(document.body.dataset.updates || 0)") as Promise<number>;

Deno.test({
  name: chromium ? NAME : `${NAME} (SKIPPED: no Chromium found at ${CANDIDATES.join(", ")} ` +
    "or $CHROME_PATH; apt-get install chromium)",
  ignore: chromium === null,
  async fn() {
    const o = parseSimWorkerArgs(["--port", "0", "--time-scale", "0"]);
    const sims = [0, 1, 2, 3].map(() => startSimWorker(o as Exclude<typeof o, "help">));
    const g = await startGateway(sims.map((s) => s.url), {
      policy: "cache_aware",
      health: { intervalSecs: 1, failureThreshold: 1 },
    });
    let browser: Browser | null = null;
    try {
      browser = await puppeteer.launch({
        executablePath: chromium!,
        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
      });
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on("console", (m) => {
        if (m.type() === "error" || m.type() === "warn") problems.push(`${m.type()}: ${m.text()}`);
      });
      page.on("pageerror", (e) => problems.push(`page error: ${e}`));
      page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
      const origin = new URL(g.metricsUrl).origin;
      const res = await page.goto(`${origin}/dashboard`);
      assert.equal(res?.status(), 200);

      // The four workers, all ready.
      await page.waitForFunction(`${ROWS}.length === 4`);
      let shown = await rows(page);
      assert.deepEqual(shown.map((r) => r.url), sims.map((s) => s.url));
      assert.deepEqual(shown.map((r) => r.state), ["ok", "ok", "ok", "ok"]);
      assert.deepEqual(shown.map((r) => r.requests), ["0", "0", "0", "0"]);

      // Requests through the gateway show up in the page's counts.
      for (let i = 0; i < 8; i++) {
        const r = await fetch(`${g.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: "sim-model",
            messages: [{ role: "user", content: `question ${i % 3}: what is a prefix cache?` }],
            max_tokens: 4,
            stream: true,
            stream_options: { include_usage: true },
          }),
        });
        assert.equal(r.status, 200);
        await r.text();
      }
      await page.waitForFunction(`${ROWS}.reduce((n, r) => n + Number(r.requests), 0) === 8`);

      // A killed worker: once the gateway has seen it go, the page marks it within two updates.
      const victim = g.gw.registry.byUrl(sims[3].url)!;
      await sims[3].close();
      await until(
        () => victim.status !== "ready",
        (l) => g.gw.registry.subscribe(l),
        "the gateway's probe to find the killed worker",
      );
      const seen = await updates(page);
      await within(
        page.waitForSelector(`tr[data-url="${sims[3].url}"][data-state="bad"]`),
        "the page to mark the killed worker",
      );
      const marked = await updates(page);
      assert.ok(marked - seen <= 2, `marked after ${marked - seen} updates`);
      shown = await rows(page);
      assert.deepEqual(shown.map((r) => r.state), ["ok", "ok", "ok", "bad"]);

      assert.deepEqual(problems, [], "no console error, page error or failed request");
    } finally {
      await browser?.close();
      await g.close();
      await Promise.all(sims.map((s) => s.close()));
    }
  },
});
