/**
 * The status page's two answers, for whichever port serves them: the page (constant HTML,
 * encoded once, with its Content-Security-Policy) and the snapshot (`?since=N`: only samples
 * numbered above N; absent or not a number: every kept one), never cached.
 */

import { DASHBOARD_CSP, DASHBOARD_HTML } from "./page.ts";
import { snapshot, type SnapshotDeps } from "./snapshot.ts";

let encoded: Uint8Array<ArrayBuffer> | null = null;

/** The page's size in bytes (UTF-8), as served. */
export function dashboardPageBytes(): number {
  return (encoded ??= new TextEncoder().encode(DASHBOARD_HTML)).byteLength;
}

/** `GET /dashboard`: the page. */
export function dashboardPage(): Response {
  encoded ??= new TextEncoder().encode(DASHBOARD_HTML);
  return new Response(encoded, {
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": DASHBOARD_CSP,
      "x-content-type-options": "nosniff",
      "cache-control": "no-cache",
    },
  });
}

/** `GET /dashboard/snapshot`: the JSON snapshot with the samples newer than `?since=`. */
export function dashboardSnapshot(d: SnapshotDeps, url: URL): Response {
  const raw = Number(url.searchParams.get("since") ?? "0");
  const since = Number.isFinite(raw) && raw > 0 ? Math.floor(raw) : 0;
  return new Response(JSON.stringify(snapshot(d, since)), {
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}
