/**
 * Small request helpers of the HTTP worker control (`http_control.ts`): a timeout per call, the
 * worker's bearer key, and an outer signal that stops everything at shutdown.
 */

import type { ControlReply } from "./control.ts";

/** The `fetch` the HTTP worker control calls; injectable for tests. */
export type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

/** GETs (or `method`s) `url` with a timeout; never throws. */
export async function getText(
  fetchFn: FetchFn,
  url: string,
  timeoutMs: number,
  apiKey: string | null,
  signal?: AbortSignal,
  method = "GET",
): Promise<ControlReply> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const sig = signal ? AbortSignal.any([signal, timeout]) : timeout;
  try {
    const res = await fetchFn(url, {
      method,
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      signal: sig,
    });
    const text = await res.text();
    return { status: res.status, text };
  } catch (e) {
    const msg = timeout.aborted
      ? `timed out after ${timeoutMs} ms`
      : runtimeRefusal(e) ?? (e as Error)?.message ?? String(e);
    return { status: 0, text: "", error: msg };
  }
}

/** The prefix of a transport error that Deno's net grant, not the worker, caused. */
export const RUNTIME_REFUSED = "refused by the runtime net grant";

/**
 * The runtime's own refusal behind a fetch error (`NotCapable`, "Requires net access to ..."),
 * which fetch wraps as "fetch failed"; null for any other error.
 */
export function runtimeRefusal(e: unknown): string | null {
  for (let x = e; x instanceof Error; x = x.cause) {
    const m = /Requires net access to "[^"]*"/.exec(x.message);
    if (x instanceof Deno.errors.NotCapable || m) {
      return `${RUNTIME_REFUSED}: ${m?.[0] ?? x.message}`;
    }
  }
  return null;
}

/** Parses JSON text, or null when it is not JSON. */
export function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
