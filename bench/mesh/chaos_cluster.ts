/**
 * N real gateway processes with the mesh on, router i in namespace `smgc-i` at 10.213.0.(i+1)
 * with the ports of the quick start (HTTP 30000, metrics 29000, mesh 39527), started with the
 * exact command line of `deno task start` plus the mesh flags. Each router's stderr goes to
 * `<logDir>/r<i>.<life>.log`. A poller per namespace feeds a `Watcher` with what each router
 * believes. Routers can be killed, paused, restarted under the same name and scraped.
 */

import { type Proc, type ProcessGroup, signal } from "./chaos_proc.ts";
import type { Testbed } from "./chaos_netns.ts";
import { allAlive, Watcher } from "./chaos_watch.ts";
import type { PollLine } from "./chaos_poll.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const POLLER = new URL("./chaos_poll.ts", import.meta.url).pathname;

/** Runtime flags of `deno task start`, kept identical. */
const RUN_FLAGS = [
  "--unstable-no-legacy-abort",
  "--allow-net",
  "--allow-env=RUST_LOG,SMG_LOG,GRPC_NODE_VERBOSITY,GRPC_VERBOSITY,GRPC_NODE_TRACE,GRPC_TRACE," +
  "GRPC_SSL_CIPHER_SUITES,GRPC_DEFAULT_SSL_ROOTS_FILE_PATH,GRPC_NODE_USE_ALTERNATIVE_RESOLVER," +
  "GRPC_NODE_DEBUG_SEND_ERROR_DETAILS,GRPC_EXPERIMENTAL_ENABLE_OUTLIER_DETECTION",
];

/** Options of a cluster. */
export interface ClusterOptions {
  /** Routers (default 5; at most the testbed's size). */
  n?: number;
  /** Directory for router logs (required in practice; default /tmp/smg-chaos). */
  logDir?: string;
  /** Poll period of /mesh/status in ms (default 1000). */
  pollMs?: number;
  /** Longest a poller runs before it stops by itself, ms (default 2 h). */
  pollLimitMs?: number;
  /** Longest wait for a router's "smg listening" line, ms (default 60 s). */
  startLimitMs?: number;
}

/** One router process. */
interface Router {
  name: string;
  proc: Proc | null;
  poller: Proc | null;
  pollPump: Promise<void> | null;
  life: number;
  pump: Promise<void> | null;
}

/** Parses Prometheus text into `name{labels}` → value. */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^([a-z_:][a-z0-9_:]*(?:\{[^}]*\})?) (\S+)$/gim)) {
    out.set(m[1], Number(m[2]));
  }
  return out;
}

/** A mesh of real routers in the testbed. */
export class Cluster {
  readonly n: number;
  readonly watch = new Watcher();
  readonly #procs: ProcessGroup;
  readonly #bed: Testbed;
  readonly #opts: Required<ClusterOptions>;
  readonly #routers: Router[];

  /** A cluster of stopped routers: call `start`. */
  constructor(procs: ProcessGroup, bed: Testbed, opts: ClusterOptions = {}) {
    this.#procs = procs;
    this.#bed = bed;
    this.#opts = {
      n: 5,
      logDir: "/tmp/smg-chaos",
      pollMs: 1000,
      pollLimitMs: 2 * 3600_000,
      startLimitMs: 60_000,
      ...opts,
    };
    this.n = Math.min(this.#opts.n, bed.size);
    this.#routers = [...Array(this.n).keys()].map((i) => ({
      name: `r${i}`,
      proc: null,
      poller: null,
      pollPump: null,
      life: 0,
      pump: null,
    }));
  }

  /** Router names, by index. */
  get names(): string[] {
    return this.#routers.map((r) => r.name);
  }

  #url(i: number, port: number, path: string): string {
    return `http://${this.#bed.address(i)}:${port}${path}`;
  }

  /** Starts router `i` joining through routers `via`; resolves once it listens. */
  async startRouter(i: number, via: number[]): Promise<void> {
    const r = this.#routers[i];
    const h = this.#bed.address(i);
    const args = [
      ...["run", ...RUN_FLAGS, MAIN, "--host", h, "--port", "30000"],
      ...["--prometheus-host", h, "--prometheus-port", "29000", "--policy", "round_robin"],
      ...["--shutdown-grace-period-secs", "0", "--log-level", "info", "--enable-mesh"],
      ...["--mesh-server-name", r.name, "--mesh-host", h, "--mesh-advertise-host", h],
      ...["--mesh-port", "39527"],
      ...(via.length
        ? ["--mesh-peer-urls", ...via.map((j) => `${this.#bed.address(j)}:39527`)]
        : []),
    ];
    const proc = this.#procs.spawn(
      `router ${r.name}`,
      "ip",
      this.#bed.exec(i, Deno.execPath(), args),
      {
        stderr: "piped",
      },
    );
    r.proc = proc;
    const file = await Deno.open(`${this.#opts.logDir}/${r.name}.${r.life++}.log`, {
      write: true,
      create: true,
      truncate: true,
    });
    const { promise: listening, resolve } = Promise.withResolvers<void>();
    r.pump = (async () => {
      const dec = new TextDecoder();
      let tail = "";
      for await (const chunk of proc.child.stderr) {
        for (let off = 0; off < chunk.length;) off += await file.write(chunk.subarray(off));
        tail = (tail + dec.decode(chunk, { stream: true })).slice(-4096);
        if (tail.includes('msg="smg listening"')) resolve();
      }
      file.close();
    })();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((
      res,
    ) => (timer = setTimeout(() => res("late"), this.#opts.startLimitMs)));
    const how = await Promise.race([
      listening.then(() => "up" as const),
      proc.exited.then(() => "exited" as const),
      late,
    ]);
    clearTimeout(timer);
    if (how !== "up") {
      await this.#procs.stop(proc);
      throw new Error(
        `router ${r.name} ${how === "late" ? "did not listen in time" : "exited"}; ` +
          `see ${this.#opts.logDir}/${r.name}.${r.life - 1}.log`,
      );
    }
  }

  /** Starts every router (each told about all others) and a poller in each namespace. */
  async start(): Promise<void> {
    const all = [...Array(this.n).keys()];
    await Promise.all(all.map((i) => this.startRouter(i, all.filter((j) => j !== i))));
    for (const i of all) this.startPoller(i);
  }

  /** Starts router `i`'s poller at the cluster's poll period (if it has none). */
  startPoller(i: number): void {
    const r = this.#routers[i];
    if (r.poller) return;
    const every = this.#opts.pollMs;
    const rounds = Math.ceil(this.#opts.pollLimitMs / every);
    const timeout = Math.max(200, Math.min(every * 0.9, 900));
    const args = [
      ...["run", "--allow-net", POLLER, "status", this.#url(i, 30000, "/mesh/status")],
      ...[String(every), String(rounds), String(Math.round(timeout))],
    ];
    const p = this.#procs.spawn(
      `poller ${r.name}`,
      "ip",
      this.#bed.exec(i, Deno.execPath(), args),
      {
        stdout: "piped",
      },
    );
    r.poller = p;
    r.pollPump = (async () => {
      let buf = "";
      for await (const text of p.child.stdout.pipeThrough(new TextDecoderStream())) {
        buf += text;
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.startsWith("{")) {
            this.watch.push({ ...JSON.parse(line) as PollLine, observer: r.name });
          }
        }
      }
    })();
  }

  /** Stops every poller (so nothing polls during a measurement window). */
  async stopPollers(): Promise<void> {
    await Promise.all(this.#routers.map(async (r) => {
      if (r.poller) await this.#procs.stop(r.poller, 2000);
      await r.pollPump;
      r.poller = null;
      r.pollPump = null;
    }));
  }

  /** Sends `sig` to router `i`; after SIGKILL waits until it is gone. */
  async signal(i: number, sig: Deno.Signal): Promise<void> {
    const p = this.#routers[i].proc;
    if (!p) return;
    signal(p, sig);
    if (sig === "SIGKILL") {
      await p.exited;
      await this.#routers[i].pump;
      this.#routers[i].proc = null;
    }
  }

  /** Resolves when every running router lists every router ALIVE in an answer after `since`. */
  formed(limitMs: number, since = Date.now()): Promise<number> {
    const names = this.names;
    return this.watch.until(
      () => names.every((n) => allAlive(this.watch.latest(n), names, since)),
      limitMs,
      `all ${names.length} routers ALIVE everywhere`,
    );
  }

  /** Router `i`'s metrics, fetched inside its namespace. */
  async metrics(i: number): Promise<Map<string, number>> {
    const args = ["run", "--allow-net", POLLER, "get", this.#url(i, 29000, "/metrics"), "5000"];
    const r = await this.#procs.run("ip", this.#bed.exec(i, Deno.execPath(), args), 20_000);
    if (r.code !== 0) throw new Error(`metrics of r${i}: ${r.stderr.trim()}`);
    return parseMetrics(r.stdout);
  }

  /** One /mesh/status answer of router `i`, fetched inside its namespace (no poller needed). */
  async statusOnce(i: number): Promise<PollLine> {
    const url = this.#url(i, 30000, "/mesh/status");
    const args = ["run", "--allow-net", POLLER, "status", url, "0", "1", "2000"];
    const r = await this.#procs.run("ip", this.#bed.exec(i, Deno.execPath(), args), 20_000);
    return JSON.parse(r.stdout.trim() || '{"t":0,"ok":false,"err":"no output"}') as PollLine;
  }

  /** Stops pollers and routers (SIGTERM, then SIGKILL), waiting for their logs to be written. */
  async stop(): Promise<void> {
    await this.stopPollers();
    await Promise.all(this.#routers.map(async (r) => {
      if (r.proc) await this.#procs.stop(r.proc);
      await r.pump;
      r.proc = null;
    }));
  }
}
