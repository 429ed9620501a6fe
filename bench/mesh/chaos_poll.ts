/**
 * The chaos bench's poller, started inside a router's namespace (`ip netns exec smgc-i deno run
 * --allow-net chaos_poll.ts ...`) so that it reaches the router over that namespace's loopback
 * and never adds traffic to (or loses packets on) the veth being measured.
 *
 *   chaos_poll.ts status URL EVERY_MS ROUNDS TIMEOUT_MS
 *     polls URL (a /mesh/status) every EVERY_MS, at most ROUNDS times, and prints one JSON line
 *     per round: {"t":ms,"ok":true,"self":"r0","m":{"r0":["ALIVE",1],...}} or
 *     {"t":ms,"ok":false,"err":"..."}; t is the wall clock when the answer (or error) came.
 *   chaos_poll.ts get URL TIMEOUT_MS
 *     prints URL's body once (metrics), exit code 1 on failure.
 */

/** One poll result, as printed. */
export interface PollLine {
  /** Wall-clock ms when the answer arrived. */
  t: number;
  /** Whether the router answered. */
  ok: boolean;
  /** The router's own name. */
  self?: string;
  /** Member name → [status, incarnation]. */
  m?: Record<string, [string, number]>;
  /** Why the poll failed. */
  err?: string;
}

interface MeshStatus {
  name: string;
  members: { name: string; status: string; incarnation: number }[];
}

async function pollOnce(url: string, timeoutMs: number): Promise<PollLine> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = await res.json() as MeshStatus;
    const m: Record<string, [string, number]> = {};
    for (const x of body.members) m[x.name] = [x.status, x.incarnation];
    return { t: Date.now(), ok: true, self: body.name, m };
  } catch (e) {
    return { t: Date.now(), ok: false, err: e instanceof Error ? e.name : String(e) };
  }
}

async function status(url: string, everyMs: number, rounds: number, timeoutMs: number) {
  const start = Date.now();
  for (let k = 0; k < rounds; k++) {
    const wait = start + k * everyMs - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    console.log(JSON.stringify(await pollOnce(url, timeoutMs)));
  }
}

async function get(url: string, timeoutMs: number): Promise<number> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    console.log(await res.text());
    return res.ok ? 0 : 1;
  } catch (e) {
    console.error(String(e));
    return 1;
  }
}

if (import.meta.main) {
  const [mode, url, ...rest] = Deno.args;
  const n = rest.map(Number);
  if (mode === "status" && n.length === 3 && n.every(Number.isFinite)) {
    await status(url, n[0], n[1], n[2]);
  } else if (mode === "get" && n.length === 1) {
    Deno.exit(await get(url, n[0]));
  } else {
    console.error(
      "usage: chaos_poll.ts status URL EVERY_MS ROUNDS TIMEOUT_MS | get URL TIMEOUT_MS",
    );
    Deno.exit(2);
  }
}
