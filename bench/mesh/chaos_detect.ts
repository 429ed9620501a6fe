/**
 * Detection after SIGKILL: for each cluster size, a fresh mesh; then, `kills` times, SIGKILL a
 * random router, time the first survivor answering it SUSPECTED (or DOWN) and the moment every
 * survivor answers DOWN, restart it under the same name and ports joining through one random
 * survivor, and wait until every router lists every router ALIVE before the next kill (after a
 * random gap, so kills land at any phase of the probe rounds, and a fresh all-ALIVE answer from
 * every router; non-ALIVE answers seen in that gap are counted as `unsettled`). Times come from polling each
 * survivor's /mesh/status every `pollMs` from inside its namespace (the `Status:` log lines are
 * rate-limited to one a second, too coarse to time with), so they are late by at most one poll
 * period plus one answer.
 */

import { Cluster } from "./chaos_cluster.ts";
import type { Testbed } from "./chaos_netns.ts";
import type { ProcessGroup } from "./chaos_proc.ts";
import { seededRandom, sleep, summarize, type Summary } from "./chaos_stats.ts";
import { statusIn } from "./chaos_watch.ts";

/** Options of the detection runs. */
export interface DetectOptions {
  /** Cluster sizes (default [3, 5]). */
  sizes?: number[];
  /** Kills per size (default 20). */
  kills?: number;
  /** Poll period of /mesh/status, ms (default 20). */
  pollMs?: number;
  /** Longest wait for DOWN everywhere after a kill, ms (default 30 s). */
  downLimitMs?: number;
  /** Longest wait for the mesh to form or re-form, ms (default 60 s). */
  formLimitMs?: number;
  /** Random gap between re-forming and the next kill, [min, max] ms (default [1000, 3000]). */
  gapMs?: [number, number];
  /** Seed of the victim and survivor choice (default 1). */
  seed?: number;
  /** Router logs go to `<logDir>/detect-n<N>/` (default /tmp/smg-chaos). */
  logDir?: string;
}

/** One kill. */
export interface KillSample {
  /** Kill number, from 0. */
  k: number;
  /** When the SIGKILL was sent (ISO), to find it in the router logs. */
  at: string;
  /**
   * Answers × members not ALIVE during the gap before this kill (the mesh had re-formed, so
   * these are suspicions of live routers, typically of the one restarted just before).
   */
  unsettled: number;
  /** The first of those, as "observer saw member STATUS at ISO time". */
  firstUnsettled: string | null;
  /** Router killed. */
  victim: string;
  /** Survivor it rejoined through. */
  via: string;
  /** Kill → first survivor answering SUSPECTED or DOWN, ms (null: never within the limit). */
  suspectMs: number | null;
  /** Who that was. */
  firstSuspecter: string | null;
  /** Kill → every survivor answering DOWN, ms. */
  downMs: number | null;
  /** Restart → every router listing every router ALIVE, ms. */
  rejoinMs: number | null;
}

/** The result for one cluster size. */
export interface DetectResult {
  /** Routers. */
  n: number;
  /** Every kill. */
  samples: KillSample[];
  /** Kill → first SUSPECTED. */
  suspect: Summary;
  /** Kill → DOWN everywhere. */
  down: Summary;
  /** Restart → ALIVE everywhere. */
  rejoin: Summary;
  /** Why the run stopped early, if it did. */
  error?: string;
}

async function killOnce(
  c: Cluster,
  k: number,
  random: () => number,
  o: Required<DetectOptions>,
): Promise<KillSample> {
  const vi = Math.floor(random() * c.n);
  const victim = c.names[vi];
  const survivors = c.names.filter((n) => n !== victim);
  const viaIndex = [...Array(c.n).keys()].filter((i) => i !== vi)[
    Math.floor(random() * (c.n - 1))
  ];
  let unsettled = 0;
  let firstUnsettled: string | null = null;
  const unwatch = c.watch.listen((ob) => {
    for (const [m, [st]] of Object.entries(ob.m ?? {})) {
      if (st === "ALIVE") continue;
      unsettled++;
      firstUnsettled ??= `${ob.observer} saw ${m} ${st} at ${new Date(ob.t).toISOString()}`;
    }
  });
  try {
    await sleep(o.gapMs[0] + random() * (o.gapMs[1] - o.gapMs[0]));
    // A fresh answer from every router, all ALIVE, right before the kill.
    await c.formed(o.formLimitMs);
  } finally {
    unwatch();
  }
  let suspectAt: number | null = null;
  let firstSuspecter: string | null = null;
  const t0 = Date.now();
  const unlisten = c.watch.listen((ob) => {
    if (suspectAt !== null || ob.t <= t0 || !survivors.includes(ob.observer)) return;
    const s = statusIn(ob, victim);
    if (s === "SUSPECTED" || s === "DOWN") [suspectAt, firstSuspecter] = [ob.t, ob.observer];
  });
  await c.signal(vi, "SIGKILL");
  let downAt: number | null = null;
  try {
    downAt = await c.watch.until(
      () =>
        survivors.every((s) => {
          const ob = c.watch.latest(s);
          return ob !== undefined && ob.t > t0 && statusIn(ob, victim) === "DOWN";
        }),
      o.downLimitMs,
      `${victim} DOWN on every survivor`,
    );
  } catch (e) {
    console.error(`  ${(e as Error).message}`);
  } finally {
    unlisten();
  }
  const r0 = Date.now();
  await c.startRouter(vi, [viaIndex]);
  const rejoinAt = await c.formed(o.formLimitMs, r0);
  return {
    k,
    at: new Date(t0).toISOString(),
    unsettled,
    firstUnsettled,
    victim,
    via: c.names[viaIndex],
    suspectMs: suspectAt === null ? null : suspectAt - t0,
    firstSuspecter,
    downMs: downAt === null ? null : downAt - t0,
    rejoinMs: rejoinAt - r0,
  };
}

/** Runs the kills for every size; a size whose mesh fails to re-form stops with `error`. */
export async function runDetect(
  procs: ProcessGroup,
  bed: Testbed,
  opts: DetectOptions = {},
): Promise<DetectResult[]> {
  const o: Required<DetectOptions> = {
    sizes: [3, 5],
    kills: 20,
    pollMs: 20,
    downLimitMs: 30_000,
    formLimitMs: 60_000,
    gapMs: [1000, 3000],
    seed: 1,
    logDir: "/tmp/smg-chaos",
    ...opts,
  };
  const random = seededRandom(o.seed);
  const out: DetectResult[] = [];
  for (const n of o.sizes) {
    const logDir = `${o.logDir}/detect-n${n}`;
    await Deno.mkdir(logDir, { recursive: true });
    const c = new Cluster(procs, bed, { n, logDir, pollMs: o.pollMs });
    const samples: KillSample[] = [];
    let error: string | undefined;
    try {
      await c.start();
      await c.formed(o.formLimitMs, 0);
      for (let k = 0; k < o.kills; k++) {
        const s = await killOnce(c, k, random, o);
        samples.push(s);
        console.error(
          `detect n=${n} kill ${k + 1}/${o.kills}: ${s.victim} suspected ${s.suspectMs} ms ` +
            `(${s.firstSuspecter}), DOWN everywhere ${s.downMs} ms, rejoined ${s.rejoinMs} ms` +
            (s.unsettled
              ? `; before it: ${s.unsettled} non-ALIVE answers, ${s.firstUnsettled}`
              : ""),
        );
      }
    } catch (e) {
      error = (e as Error).message;
      console.error(`detect n=${n} stopped: ${error}`);
    } finally {
      await c.stop();
    }
    out.push({
      n,
      samples,
      suspect: summarize(samples.map((s) => s.suspectMs)),
      down: summarize(samples.map((s) => s.downMs)),
      rejoin: summarize(samples.map((s) => s.rejoinMs)),
      ...(error ? { error } : {}),
    });
  }
  return out;
}
