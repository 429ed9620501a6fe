/**
 * The status page (`GET /dashboard`): one HTML document with its style and script inline, no
 * build step and nothing fetched from elsewhere (its Content-Security-Policy forbids it: it works
 * in an air-gapped cluster). It polls `dashboard/snapshot` (relative, so it works behind a path
 * prefix) at the snapshot's `interval_ms`, at most once a second, and draws with inline SVG.
 * The script is `page_script.ts`.
 */

import { PAGE_SCRIPT } from "./page_script.ts";

const STYLE = `
:root{--bg:#f7f7f8;--fg:#1b1d21;--mute:#6b7080;--card:#fff;--line:#e3e4e8;--ok:#15803d;
--warn:#b45309;--bad:#b91c1c;--badbg:#fde8e8;--warnbg:#fff4de;--hot:#1d4ed8;--hotbg:#e6eeff}
@media (prefers-color-scheme:dark){:root{--bg:#14161a;--fg:#e6e7ea;--mute:#9aa0ad;--card:#1d2026;
--line:#30343c;--badbg:#3a1c1c;--warnbg:#3a2e16;--hotbg:#1c2745;--hot:#8fb0ff;--bad:#f87171;
--ok:#4ade80;--warn:#fbbf24}}
*{box-sizing:border-box}
body{margin:0;font:14px/1.4 system-ui,sans-serif;background:var(--bg);color:var(--fg)}
header{display:flex;flex-wrap:wrap;gap:4px 16px;align-items:baseline;padding:12px 20px;
border-bottom:1px solid var(--line);background:var(--card)}
header h1{font-size:18px;margin:0}
.mute{color:var(--mute)}
#conn{margin-left:auto;font-weight:600}
#conn.live{color:var(--ok)}#conn.down{color:var(--bad)}
main{padding:16px 20px;display:grid;gap:16px;max-width:1400px}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(130px,1fr));gap:12px}
.tile,.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px}
.tile b{display:block;font-size:20px;font-variant-numeric:tabular-nums;white-space:nowrap}
.tile span{color:var(--mute);font-size:12px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(360px,1fr));gap:16px}
.card h2{font-size:14px;margin:0 0 6px}
svg{width:100%;height:auto;display:block}
svg text{font-size:10px;fill:var(--mute)}
svg .grid{stroke:var(--line)}
svg path{fill:none;stroke-width:1.6}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;margin-top:4px}
.legend i{display:inline-block;width:10px;height:3px;margin-right:5px;vertical-align:middle}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);white-space:nowrap}
th{font-size:12px;color:var(--mute);font-weight:600}
td.n,th.n{text-align:right}
tr[data-state=bad]{background:var(--badbg)}
tr[data-state=bad] td.st{color:var(--bad);font-weight:700}
tr[data-state=warn]{background:var(--warnbg)}
tr[data-state=warn] td.st{color:var(--warn);font-weight:700}
tr.busiest td.u{font-weight:700}
.badge{font-size:11px;padding:1px 6px;border-radius:9px;margin-left:6px;background:var(--hotbg);
color:var(--hot)}
.bar{display:inline-block;height:8px;background:var(--hot);border-radius:2px;margin-right:6px;
vertical-align:middle;opacity:.7}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:6px;
background:var(--ok)}
tr[data-state=bad] .dot{background:var(--bad)}tr[data-state=warn] .dot{background:var(--warn)}
.scroll{overflow-x:auto}
#keyform{display:none}
#keyform input{font:inherit;padding:4px 8px;width:320px;max-width:100%}
.hide{display:none}
`;

const BODY = `
<header><h1>smg status</h1><span id="summary" class="mute">connecting…</span>
<span id="conn">…</span></header>
<main>
<form id="keyform" class="card"><b>This gateway needs a control-plane key.</b>
<p class="mute">It is sent as a bearer token on each snapshot request and kept for this tab
only (sessionStorage).</p><input id="key" type="password" autocomplete="off"
placeholder="--control-plane-api-keys or --api-key key"> <button>Use key</button></form>
<section class="tiles" id="tiles"></section>
<section class="card"><h2>Workers</h2><div class="scroll"><table id="workers"><thead><tr>
<th>Worker</th><th>Model</th><th>Status</th><th>Breaker</th><th class="n">In flight</th>
<th class="n">Prefill backlog</th><th class="n">Req/s</th><th class="n">Requests</th>
<th class="n" title="Cached share of prompt tokens the worker reported (engine hit rate when no usage was read)">Cached</th>
<th class="n" title="Characters of routing text per token the worker's answers reported (its model's estimate, marked ~, until it has its own)">Chars/token</th>
<th class="n">Errors</th></tr></thead><tbody></tbody></table></div></section>
<section class="charts">
<div class="card"><h2>Requests per second, by policy branch</h2><svg id="c-req"></svg>
<div class="legend" id="l-req"></div></div>
<div class="card"><h2>Latency (ms): time to first token and request time</h2>
<svg id="c-lat"></svg><div class="legend" id="l-lat"></div></div>
<div class="card" id="pred-card"><h2>Cache prediction: reported minus predicted cached share</h2>
<svg id="c-pred"></svg><div class="legend" id="l-pred"></div></div>
<div class="card hide" id="lag-card"><h2>Mesh replication lag (ms)</h2><svg id="c-lag"></svg>
<div class="legend" id="l-lag"></div></div>
</section>
<section class="card hide" id="mesh"><h2>Mesh</h2><p id="mesh-summary" class="mute"></p>
<div class="scroll"><table id="members"><thead><tr><th>Member</th><th>Address</th>
<th>Status</th><th class="n">Incarnation</th><th>Sync stream</th><th class="n">Queued frames</th>
</tr></thead><tbody></tbody></table></div></section>
<section class="card hide" id="slow"><h2>Recent slow requests (last 5 minutes)</h2>
<div class="scroll"><table id="slow-requests"><thead><tr><th>Trace id</th><th>Route</th>
<th class="n">Status</th><th class="n">Time (ms)</th><th class="n">Age</th><th>Request id</th>
</tr></thead><tbody></tbody></table></div></section>
</main>
`;

/** The whole page. */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>smg status</title><link rel="icon" href="data:,">
<style>${STYLE}</style></head><body>${BODY}<script>${PAGE_SCRIPT}</script></body></html>
`;

/**
 * The page's Content-Security-Policy: inline style and script, requests to its own origin only,
 * nothing else (no fonts, images or scripts from anywhere).
 */
export const DASHBOARD_CSP = "default-src 'none'; script-src 'unsafe-inline'; " +
  "style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; " +
  "form-action 'none'; frame-ancestors 'none'";
