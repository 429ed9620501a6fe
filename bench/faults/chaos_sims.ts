/**
 * The chaos benchmark's fleet (`chaos_streams.ts`): N `smg sim-worker` child processes pinned to
 * one CPU, each on a fixed port, so one can be SIGKILLed and started again on the same port, or
 * frozen (SIGSTOP) and thawed (SIGCONT). Started and stopped through `support/processes.ts`, so
 * `killAll` ends them on error and signal too (`thawAll` first: a frozen process only takes the
 * SIGTERM once thawed, and would otherwise wait for the SIGKILL).
 */

import { type Child, HOST, spawn, stop, waitFor } from "../../support/processes.ts";
import { ownModulesRead } from "../../support/gateway_process.ts";
import { freePorts } from "../../lib/core/free_port.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** The flags every simulated worker of a run gets (the reference worker's text does not depend on pace). */
export interface SimShape {
  /** Output length when a request sets none (`--max-new-tokens`). */
  maxNewTokens: number;
  /** Wall ms per simulated ms (`--time-scale`; 1: ~6 ms a decode step plus 0.35 ms a sequence). */
  timeScale: number;
}

/** The command line of one simulated worker on `port`, after `deno`. */
export function simWorkerArgs(port: number, shape: SimShape): string[] {
  return [
    "run",
    "--unstable-no-legacy-abort",
    `--allow-net=${HOST}`,
    "--allow-env=RUST_LOG,SMG_LOG",
    ownModulesRead(`${ROOT}main.ts`),
    `${ROOT}main.ts`,
    "sim-worker",
    "--host",
    HOST,
    "--port",
    String(port),
    "--max-new-tokens",
    String(shape.maxNewTokens),
    "--time-scale",
    String(shape.timeScale),
  ];
}

interface SimProc {
  name: string;
  port: number;
  child: Child | null;
  frozen: boolean;
}

/** Running simulated workers, each of which can be killed, restarted, frozen and thawed. */
export class SimFleet {
  readonly #workers: SimProc[];
  readonly #shape: SimShape;
  readonly #cpu: number;
  readonly #dir: string;

  private constructor(names: string[], shape: SimShape, cpu: number, dir: string) {
    const ports = freePorts(names.length);
    this.#workers = names.map((name, i) => ({ name, port: ports[i], child: null, frozen: false }));
    this.#shape = shape;
    this.#cpu = cpu;
    this.#dir = dir;
  }

  /** Starts one worker per name on `cpu` (logs `<dir>/<name>.log`), each ready on `/health`. */
  static async start(
    names: string[],
    shape: SimShape,
    cpu: number,
    dir: string,
  ): Promise<SimFleet> {
    const f = new SimFleet(names, shape, cpu, dir);
    try {
      await Promise.all(f.#workers.map((_, i) => f.restart(i)));
    } catch (e) {
      await f.stop();
      throw e;
    }
    return f;
  }

  /** The workers' base URLs, by index. */
  get urls(): string[] {
    return this.#workers.map((w) => `http://${HOST}:${w.port}`);
  }

  /** (Re)starts worker `i` on its port and waits until it answers `/health`. */
  async restart(i: number): Promise<void> {
    const w = this.#workers[i];
    if (w.child) throw new Error(`${w.name} is running`);
    w.child = await spawn(
      w.name,
      this.#cpu,
      [Deno.execPath(), ...simWorkerArgs(w.port, this.#shape)],
      this.#dir,
      ROOT,
    );
    await waitFor(w.name, w.child, `http://${HOST}:${w.port}/health`, (s) => s === 200);
  }

  /** SIGKILLs worker `i` and waits for its exit. */
  async kill(i: number): Promise<void> {
    const w = this.#workers[i];
    const child = w.child;
    if (!child) return;
    w.child = null;
    child.proc.kill("SIGKILL");
    await child.proc.status;
    await stop([child]); // forgets it; it has exited
  }

  /** Freezes worker `i` (SIGSTOP): its sockets stay open, nothing is read or sent. */
  freeze(i: number): void {
    const w = this.#workers[i];
    if (!w.child) return;
    w.child.proc.kill("SIGSTOP");
    w.frozen = true;
  }

  /** Thaws worker `i` (SIGCONT). */
  thaw(i: number): void {
    const w = this.#workers[i];
    if (!w.child || !w.frozen) return;
    w.child.proc.kill("SIGCONT");
    w.frozen = false;
  }

  /** Thaws every frozen worker. */
  thawAll(): void {
    this.#workers.forEach((_, i) => this.thaw(i));
  }

  /** Thaws and stops every worker. */
  async stop(): Promise<void> {
    this.thawAll();
    const running = this.#workers.flatMap((w) => (w.child ? [w.child] : []));
    this.#workers.forEach((w) => w.child = null);
    await stop(running);
  }
}
