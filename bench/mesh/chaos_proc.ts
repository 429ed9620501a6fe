/**
 * The chaos bench's processes: every child it starts (routers, pollers, `ip`/`tc`/`nft`) goes
 * through one `ProcessGroup`, which remembers it by PID and stops it (SIGCONT, SIGTERM, then
 * SIGKILL) on `stop` or `stopAll`, so an error or Ctrl-C leaves nothing running. Once closed, the
 * group refuses to start anything new, so a loop racing the cleanup cannot leak a child.
 */

/** A started child. */
export interface Proc {
  /** What it is, for messages. */
  label: string;
  /** Its PID. */
  pid: number;
  /** The child. */
  child: Deno.ChildProcess;
  /** Resolves with its exit status once it exited. */
  exited: Promise<Deno.CommandStatus>;
}

/** How to start a child. */
export interface SpawnOptions {
  /** What to do with stdout (default "null"). */
  stdout?: "piped" | "null";
  /** What to do with stderr (default "null"). */
  stderr?: "piped" | "null";
  /** What to do with stdin (default "null"). */
  stdin?: "piped" | "null";
}

/** The output of a finished one-shot command. */
export interface RunResult {
  /** Exit code (-1 if it was killed on timeout). */
  code: number;
  /** Its stdout. */
  stdout: string;
  /** Its stderr. */
  stderr: string;
}

/** Sends `sig` to `p`, ignoring a child that is already gone. */
export function signal(p: Proc, sig: Deno.Signal): void {
  try {
    p.child.kill(sig);
  } catch { /* already exited */ }
}

/** Resolves true if `p` settles within `ms`, false otherwise; clears its timer either way. */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([p.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Children started by the bench, stopped by PID. */
export class ProcessGroup {
  readonly #live = new Map<number, Proc>();
  #closed = false;

  /** Starts `cmd args` and remembers it; refused once `stopAll` was called. */
  spawn(label: string, cmd: string, args: string[], opts: SpawnOptions = {}): Proc {
    if (this.#closed) throw new Error(`not starting ${label}: the bench is shutting down`);
    return this.#start(label, cmd, args, opts);
  }

  #start(label: string, cmd: string, args: string[], opts: SpawnOptions): Proc {
    const child = new Deno.Command(cmd, {
      args,
      stdin: opts.stdin ?? "null",
      stdout: opts.stdout ?? "null",
      stderr: opts.stderr ?? "null",
    }).spawn();
    const p: Proc = { label, pid: child.pid, child, exited: child.status };
    this.#live.set(child.pid, p);
    p.exited.finally(() => this.#live.delete(child.pid));
    return p;
  }

  /**
   * Runs a short command to completion, killing it after `limitMs` (default 15 s); allowed
   * after `stopAll`, since the cleanup itself runs `ip`.
   */
  async run(cmd: string, args: string[], limitMs = 15_000): Promise<RunResult> {
    const p = this.#start(`${cmd} ${args.join(" ")}`, cmd, args, {
      stdout: "piped",
      stderr: "piped",
    });
    const timer = setTimeout(() => signal(p, "SIGKILL"), limitMs);
    try {
      const out = await p.child.output();
      const dec = new TextDecoder();
      return {
        code: out.signal ? -1 : out.code,
        stdout: dec.decode(out.stdout),
        stderr: dec.decode(out.stderr),
      };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Like `run`, but throws on a non-zero exit. */
  async must(cmd: string, args: string[], limitMs = 15_000): Promise<string> {
    const r = await this.run(cmd, args, limitMs);
    if (r.code !== 0) {
      throw new Error(`"${cmd} ${args.join(" ")}" failed (${r.code}): ${r.stderr.trim()}`);
    }
    return r.stdout;
  }

  /** Stops `p`: SIGCONT (it may be paused), SIGTERM, then SIGKILL after `graceMs`. */
  async stop(p: Proc, graceMs = 6000): Promise<void> {
    if (!this.#live.has(p.pid)) return void await p.exited.catch(() => {});
    signal(p, "SIGCONT");
    signal(p, "SIGTERM");
    if (!await within(p.exited, graceMs)) signal(p, "SIGKILL");
    await p.exited.catch(() => {});
  }

  /** Stops every live child and refuses new ones from now on. */
  async stopAll(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#live.values()].map((p) => this.stop(p)));
  }

  /** Labels and PIDs of the children still running. */
  live(): string[] {
    return [...this.#live.values()].map((p) => `${p.label} (${p.pid})`);
  }
}
