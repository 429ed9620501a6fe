/**
 * docs/operations.md's picture of the status page (docs/dashboard.png): loads a running gateway's
 * `/dashboard` in headless Chromium (puppeteer-core, the system's browser), waits for two updates,
 * and writes a PNG of the whole page. Taken during the routing benchmark: start
 *
 *   deno task bench:routing --targets smg:cache_aware --rate 16 --warmup 60 --duration 120
 *
 * then, once its gateway has run for a minute or two (its metrics port is the
 * `--prometheus-port` of the `main.ts` process `ps -eo args` shows):
 *
 *   deno run --allow-run --allow-read --allow-env --allow-write=/tmp,docs \
 *     --allow-net=127.0.0.1 bench/dashboard/screenshot.ts http://127.0.0.1:PORT/dashboard \
 *     docs/dashboard.png
 */

import puppeteer from "puppeteer-core";

const [url, out = "docs/dashboard.png"] = Deno.args;
if (!url) {
  console.error("usage: screenshot.ts URL [OUT.png]");
  Deno.exit(2);
}
const browser = await puppeteer.launch({
  executablePath: Deno.env.get("CHROME_PATH") ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  defaultViewport: { width: 1200, height: 400 }, // the PNG is as tall as the page
});
try {
  const page = await browser.newPage();
  await page.goto(url);
  await page.waitForFunction("Number(document.body.dataset.updates || 0) >= 2");
  await page.screenshot({ path: out, fullPage: true, type: "png" });
  console.log(`${out}: ${(await Deno.stat(out)).size} bytes`);
} finally {
  await browser.close();
}
