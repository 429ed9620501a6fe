/**
 * wrk, the load generator: one run on CPU 0 (`-t 1 --timeout 10s --latency`, the request from a
 * Lua script), parsed into requests, req/s, p50/p99 and errors. A run that overruns its duration
 * by 30 s is killed; runs in progress are registered so that `killAll` stops them too.
 */

import { trackLoad, untrackLoad } from "../../support/processes.ts";

/** What wrk reported. */
export interface WrkResult {
  requests: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: { connect: number; read: number; write: number; timeout: number };
}

function toMs(v: string, unit: string): number {
  const n = Number(v);
  switch (unit) {
    case "us":
      return n / 1000;
    case "ms":
      return n;
    case "s":
      return n * 1000;
    case "m":
      return n * 60_000;
    case "h":
      return n * 3_600_000;
  }
  return NaN;
}

/** Parses `wrk --latency` output. */
export function parseWrk(out: string): WrkResult {
  const num = (re: RegExp): number | null => {
    const m = re.exec(out);
    return m ? Number(m[1]) : null;
  };
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m|h)\\s*$`, "m").exec(out);
    return m ? toMs(m[1], m[2]) : NaN;
  };
  const done = /(\d+) requests in ([\d.]+)(us|ms|s|m|h)/.exec(out);
  if (!done) throw new Error(`unexpected wrk output:\n${out}`);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    requests: Number(done[1]),
    seconds: toMs(done[2], done[3]) / 1000,
    rps: num(/Requests\/sec:\s+([\d.]+)/) ?? NaN,
    p50Ms: pct("50"),
    p99Ms: pct("99"),
    non2xx: num(/Non-2xx or 3xx responses: (\d+)/) ?? 0,
    socketErrors: {
      connect: Number(sock?.[1] ?? 0),
      read: Number(sock?.[2] ?? 0),
      write: Number(sock?.[3] ?? 0),
      timeout: Number(sock?.[4] ?? 0),
    },
  };
}

/** Writes the Lua script that makes wrk send `body` as a JSON POST. */
export async function writeWrkScript(path: string, body: string): Promise<void> {
  await Deno.writeTextFile(
    path,
    `wrk.method = "POST"\nwrk.body = '${body}'\n` +
      `wrk.headers["Content-Type"] = "application/json"\n`,
  );
}

/** One wrk run on CPU 0 with the Lua `script`, killed if it overruns its duration by 30 s. */
export async function wrk(
  url: string,
  conns: number,
  seconds: number,
  script: string,
): Promise<WrkResult> {
  const proc = new Deno.Command("taskset", {
    args: [
      "-c",
      "0",
      "wrk",
      "-t",
      "1",
      "-c",
      String(conns),
      "-d",
      `${seconds}s`,
      "--timeout",
      "10s",
      "--latency",
      "-s",
      script,
      url,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  trackLoad(proc);
  const guard = setTimeout(() => {
    try {
      proc.kill("SIGKILL");
    } catch { /* gone */ }
  }, (seconds + 30) * 1000);
  try {
    const out = await proc.output();
    const text = new TextDecoder().decode(out.stdout);
    if (!out.success) {
      throw new Error(`wrk failed (${out.code}): ${new TextDecoder().decode(out.stderr)}${text}`);
    }
    return parseWrk(text);
  } finally {
    clearTimeout(guard);
    untrackLoad(proc);
  }
}
