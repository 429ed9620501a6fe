/**
 * Child processes of the benchmarks (`bench/`: overhead, routing, mesh, operator, faults): starts
 * servers pinned to a CPU with `taskset`, their stdout and stderr in one log file each; polls them
 * until ready; and kills every one of them (and any wrk run in progress) at the end, on error or
 * signal too, or a group of them earlier (`stop`). Also a small helper: a command's output.
 */

/** The only address anything listens on or sends to. */
export const HOST = "127.0.0.1";

/** A started server: its name in messages, the process and its log file. */
export interface Child {
  name: string;
  proc: Deno.ChildProcess;
  log: string;
}

const children: Child[] = [];
/** wrk runs in progress (killed with the children on exit). */
const loads = new Set<Deno.ChildProcess>();

/** Starts `cmd` pinned to `cpu` in `cwd`, stdout/stderr to `<logDir>/<name>.log`. */
export async function spawn(
  name: string,
  cpu: number,
  cmd: string[],
  logDir: string,
  cwd: string,
  env: Record<string, string> = {},
): Promise<Child> {
  const log = `${logDir}/${name}.log`;
  const file = await Deno.open(log, { write: true, create: true, truncate: true });
  const proc = new Deno.Command("taskset", {
    args: ["-c", String(cpu), ...cmd],
    cwd,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // Both streams into one file; the file closes when both end.
  const out = file.writable.getWriter();
  const pump = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s) await out.write(chunk).catch(() => {});
  };
  Promise.all([pump(proc.stdout), pump(proc.stderr)]).finally(() => out.close().catch(() => {}));
  const child = { name, proc, log };
  children.push(child);
  return child;
}

/** Registers a load generator run so that `killAll` kills it too; call `untrackLoad` after. */
export function trackLoad(proc: Deno.ChildProcess): void {
  loads.add(proc);
}

/** Forgets a finished load generator run. */
export function untrackLoad(proc: Deno.ChildProcess): void {
  loads.delete(proc);
}

/** The last `lines` lines of a log file, or `(no log)`. */
export function tail(log: string, lines = 15): string {
  try {
    return Deno.readTextFileSync(log).split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** Whether `c` exits within `ms` (0: has it exited already). */
export function exited(c: Child, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    c.proc.status.then(() => true),
    new Promise<boolean>((r) => timer = setTimeout(() => r(false), ms)),
  ]).finally(() => clearTimeout(timer));
}

/** Throws, with the log's tail, if any started child has exited. */
export async function assertAllRunning(): Promise<void> {
  for (const c of children) {
    if (await exited(c, 0)) throw new Error(`${c.name} exited during the run:\n${tail(c.log)}`);
  }
}

let killing: Promise<void> | null = null;

/** SIGTERM every child, SIGKILL whatever is still running after a second; once. */
export function killAll(): Promise<void> {
  killing ??= killChildren();
  return killing;
}

async function killChildren(): Promise<void> {
  for (const p of loads) {
    try {
      p.kill("SIGKILL");
    } catch { /* already gone */ }
  }
  await stop(children.slice());
}

/** SIGTERM `group`, SIGKILL whatever still runs a second later, and forget them. */
export async function stop(group: Child[]): Promise<void> {
  for (const c of group) {
    const i = children.indexOf(c);
    if (i >= 0) children.splice(i, 1);
    try {
      c.proc.kill("SIGTERM");
    } catch { /* already gone */ }
  }
  await Promise.all(group.map(async (c) => {
    if (await exited(c, 1000)) return;
    try {
      c.proc.kill("SIGKILL");
    } catch { /* already gone */ }
    await exited(c, 2000);
  }));
}

/** Trimmed stdout of `cmd args` (stderr if stdout is empty), or "" if it cannot be run. */
export async function run(cmd: string, args: string[]): Promise<string> {
  try {
    const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
    return new TextDecoder().decode(out.stdout).trim() ||
      new TextDecoder().decode(out.stderr).trim();
  } catch {
    return "";
  }
}

/** Polls until something accepts TCP connections on `port`, at most `attempts` times 100 ms apart. */
export function waitForListener(
  what: string,
  child: Child | null,
  port: number,
  attempts = 300,
): Promise<void> {
  return poll(what, child, attempts, async () => {
    (await Deno.connect({ hostname: HOST, port })).close();
    return null;
  });
}

/** Polls `url` until `ok(status, body)`, at most `attempts` times 100 ms apart. */
export function waitFor(
  what: string,
  child: Child | null,
  url: string,
  ok: (status: number, body: string) => boolean,
  attempts = 300,
): Promise<void> {
  return poll(what, child, attempts, async () => {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    const body = await res.text();
    return ok(res.status, body) ? null : `${res.status} ${body.slice(0, 200)}`;
  });
}

/**
 * Runs `probe` until it resolves null (ready), at most `attempts` times 100 ms apart; a string or
 * a throw is the last reason it was not, reported when the attempts run out or `child` exits.
 */
async function poll(
  what: string,
  child: Child | null,
  attempts: number,
  probe: () => Promise<string | null>,
): Promise<void> {
  let last = "";
  for (let i = 0; i < attempts; i++) {
    if (child && await exited(child, 0)) {
      throw new Error(`${what} exited during start-up:\n${tail(child.log)}`);
    }
    try {
      const why = await probe();
      if (why === null) return;
      last = why;
    } catch (e) {
      last = String(e);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} not ready after ${attempts / 10} s (${last})`);
}
