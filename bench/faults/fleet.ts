/**
 * The fault matrix's fleet: N faulty workers (`faulty_worker.ts`) as child processes pinned to
 * one CPU, each with its serving and control ports; one can be SIGKILLed and started again on the
 * same ports. Started and stopped through `support/processes.ts`, so `killAll` ends them
 * on error and signal too.
 */

import { type Child, HOST, spawn, stop, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import { type FaultMode, setFault, type WorkerStats, workerStats } from "./faults.ts";

const SCRIPT = new URL("./faulty_worker.ts", import.meta.url).pathname;

/** Capacity and pace of each worker (see `faulty_worker.ts`). */
export interface WorkerShape {
  /** Requests served at once. */
  slots: number;
  /** Token events per stream. */
  tokens: number;
  /** ms between token events. */
  tokenMs: number;
  /** ms before a whole answer. */
  plainMs: number;
}

/** One worker of the fleet. */
interface FleetWorker {
  child: Child;
  port: number;
  controlPort: number;
  index: number;
}

/** A running fleet of faulty workers. */
export class FaultyFleet {
  readonly #workers: FleetWorker[] = [];
  readonly #shape: WorkerShape;
  readonly #cpu: number;
  readonly #dir: string;

  private constructor(shape: WorkerShape, cpu: number, dir: string) {
    this.#shape = shape;
    this.#cpu = cpu;
    this.#dir = dir;
  }

  /** Starts `n` workers on `cpu`, logs in `dir`, and waits until each answers `/health`. */
  static async start(
    n: number,
    shape: WorkerShape,
    cpu: number,
    dir: string,
  ): Promise<FaultyFleet> {
    const f = new FaultyFleet(shape, cpu, dir);
    const ports = freePorts(2 * n);
    for (let i = 0; i < n; i++) {
      f.#workers.push({
        child: null!,
        port: ports[2 * i],
        controlPort: ports[2 * i + 1],
        index: i,
      });
    }
    try {
      await Promise.all(f.#workers.map((w) => f.#launch(w)));
    } catch (e) {
      await f.stop();
      throw e;
    }
    return f;
  }

  /** The workers' base URLs. */
  get urls(): string[] {
    return this.#workers.map((w) => `http://${HOST}:${w.port}`);
  }

  async #launch(w: FleetWorker): Promise<void> {
    const s = this.#shape;
    w.child = await spawn(
      `worker-${w.index}`,
      this.#cpu,
      [
        Deno.execPath(),
        "run",
        `--allow-net=${HOST}`,
        SCRIPT,
        "--port",
        String(w.port),
        "--control-port",
        String(w.controlPort),
        "--slots",
        String(s.slots),
        "--tokens",
        String(s.tokens),
        "--token-ms",
        String(s.tokenMs),
        "--plain-ms",
        String(s.plainMs),
        "--seed",
        String(w.index + 1),
      ],
      this.#dir,
      Deno.cwd(),
    );
    await waitFor(
      `worker ${w.index}`,
      w.child,
      `http://${HOST}:${w.port}/health`,
      (st) => st === 200,
    );
    await waitFor(
      `worker ${w.index} control`,
      w.child,
      this.#control(w) + "/stats",
      (st) => st === 200,
    );
  }

  #control(w: FleetWorker): string {
    return `http://${HOST}:${w.controlPort}`;
  }

  /** Gives worker `i` the fault `mode` for `share` of its requests. */
  fault(i: number, mode: FaultMode, share = 1): Promise<void> {
    return setFault(this.#control(this.#workers[i]), mode, share);
  }

  /** Heals every worker. */
  async healAll(): Promise<void> {
    await Promise.all(this.#workers.map((w) => setFault(this.#control(w), "none")));
  }

  /** SIGKILLs worker `i` (its process is forgotten). */
  async kill(i: number): Promise<void> {
    const w = this.#workers[i];
    w.child.proc.kill("SIGKILL");
    await w.child.proc.status;
    await stop([w.child]); // forgets it; it has exited
  }

  /** Starts worker `i` again on its ports. */
  restart(i: number): Promise<void> {
    return this.#launch(this.#workers[i]);
  }

  /** Every worker's counters. */
  stats(): Promise<WorkerStats[]> {
    return Promise.all(this.#workers.map((w) => workerStats(this.#control(w))));
  }

  /** Stops every worker. */
  async stop(): Promise<void> {
    await stop(this.#workers.map((w) => w.child).filter((c) => c !== null));
  }
}
