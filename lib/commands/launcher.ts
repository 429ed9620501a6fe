/**
 * Runs an `smg` command line with the narrowest network grant its flags need. Deno fixes a
 * thread's permissions when it starts and cannot take one host back from a global
 * `--allow-net` (`Deno.permissions.revoke` only drops entries that were listed), so when the
 * process holds a global net grant the command runs in a worker thread started with
 * `deno.permissions.net` set to the computed list (`server/net_grant.ts`): the same code path
 * for `deno run main.ts`, the bundle and the compiled binary, where re-executing with other
 * flags is impossible. Every other permission is inherited. The main thread only waits for the
 * exit code. A process started with an explicit `--allow-net=...` list runs the command in
 * itself: the operator chose the grant. Needs `--unstable-worker-options` (`deno.json` turns
 * it on for the tasks; without it Deno stops the process with exit code 70, saying so) and
 * read access to the program's own modules; a thread that cannot load them is replaced by the
 * command in this thread, with the process's grant and a warning (the old behaviour, never a
 * silent one). Known gap: the compiled binary's path is not exercised here (`deno compile`
 * cannot fetch its runtime in this workplace); it is the bundle's code, which is.
 */

import { HelpShown, parseGatewayArgs } from "../config/cli.ts";
import { validateConfig } from "../config/validate.ts";
import { ConfigError } from "../core/errors.ts";
import { createLogger, type LoggerOptions } from "../core/log.ts";
import { parseServeArgs } from "../launch/args.ts";
import { gatewayNetGrant, type NetGrant } from "../server/net_grant.ts";
import { parseSimWorkerArgs } from "../sim/cli.ts";

/**
 * Runs a command line; `exit` ends the whole process at once (a simulated crash); `grant` is the
 * net grant the command runs with, for its start-up log (null: the process's own, not computed).
 */
export type Command = (
  args: string[],
  exit: (code: number) => void,
  grant: NetGrant | null,
) => Promise<number>;

const bracket = (h: string) => (h.includes(":") && !h.startsWith("[") ? `[${h}]` : h);

/** The grant `args` need and how to log it; null when the command reaches no network. */
export function netGrantFor(args: string[]): { grant: NetGrant; log: LoggerOptions } | null {
  // The parsers print --help and --version; the command prints them once, in this thread.
  if (args.some((a) => /^(-h|--help|-V|--version)$/.test(a))) return null;
  try {
    if (args[0] === "sim-worker") {
      const o = parseSimWorkerArgs(args.slice(1));
      // Its HTTP, gRPC and ZeroMQ sockets all listen on --host; it dials nothing.
      return o === "help" ? null : { grant: { mode: "narrow", allow: [bracket(o.host)] }, log: {} };
    }
    if (args[0] === "serve") {
      const o = parseServeArgs(args.slice(1));
      if (o === "help") return null;
      const c = parseGatewayArgs(o.routerArgs);
      c.host = o.host;
      c.port = o.port;
      const g = gatewayNetGrant(c);
      // Its workers listen on --worker-host, at ports picked as they start.
      const grant: NetGrant = g.mode === "inherit"
        ? g
        : { mode: "narrow", allow: [...g.allow, bracket(o.workerHost)] };
      return { grant, log: { level: c.logLevel, json: c.logJson } };
    }
    const c = validateConfig(parseGatewayArgs(args));
    return { grant: gatewayNetGrant(c), log: { level: c.logLevel, json: c.logJson } };
  } catch (e) {
    // The command itself reports bad flags (exit 2) and prints --help.
    if (e instanceof ConfigError || e instanceof HelpShown) return null;
    throw e;
  }
}

/** Whether this code runs in a worker thread. */
export function inWorkerThread(): boolean {
  return "WorkerGlobalScope" in globalThis;
}

/** Message from the main thread to the command's thread. */
interface Start {
  args: string[];
  grant: NetGrant;
}

/** Message from the command's thread: it is loaded and waits for its arguments. */
interface Ready {
  ready: true;
}

/** Message from the command's thread: exit the process with `exit`. */
interface Exit {
  exit: number;
}

/**
 * Runs `args` with the narrowest grant: in a worker thread of `mainModule` (the program's
 * entry, which calls `commandThread` there) when the process holds a global net grant, else
 * in this thread. Resolves with the exit code.
 */
export function launch(args: string[], mainModule: string, run: Command): Promise<number> {
  const exit = (code: number) => Deno.exit(code);
  if (Deno.permissions.querySync({ name: "net" }).state !== "granted") {
    return run(args, exit, null);
  }
  const planned = netGrantFor(args);
  if (planned === null) return run(args, exit, null);
  const { grant } = planned;
  // The command logs its grant once it listens: a bad flag still fails with one line.
  if (grant.mode === "inherit") return run(args, exit, grant);
  const worker = new Worker(mainModule, {
    type: "module",
    name: "smg",
    deno: {
      permissions: {
        net: grant.allow,
        env: "inherit",
        read: "inherit",
        write: "inherit",
        run: "inherit",
        sys: "inherit",
        ffi: "inherit",
        import: "inherit",
      },
    },
  } as WorkerOptions);
  const { promise, resolve } = Promise.withResolvers<number>();
  let started = false;
  worker.onmessage = (e: MessageEvent<Ready | Exit>) => {
    if ("exit" in e.data) return resolve(e.data.exit);
    started = true;
    worker.postMessage({ args, grant } satisfies Start);
  };
  worker.onerror = (e) => {
    // Once the command runs, its uncaught error ends the process as in one thread (exit 1).
    if (started) return;
    // The thread could not load this program (no read access to its own modules, say): run
    // here with the process's grant rather than not at all, and say so.
    e.preventDefault();
    worker.terminate();
    createLogger(planned.log).child({ module: "launcher" }).warn(
      "runtime net grant not narrowed: the command thread did not start",
      {
        // deno-lint-ignore no-control-regex
        err: e.message.replace(/\x1b\[[0-9;]*m/g, "").split("\n")[0],
      },
    );
    run(args, exit, { mode: "inherit", why: "the command thread did not start" }).then(resolve);
  };
  return promise;
}

/** The command's side in a worker thread: waits for its arguments, runs, reports the code. */
export function commandThread(run: Command): void {
  const scope = globalThis as unknown as {
    onmessage: ((e: MessageEvent<Start>) => void) | null;
    postMessage(m: Ready | Exit): void;
  };
  const report = (code: number) => scope.postMessage({ exit: code });
  scope.onmessage = async (e) => {
    scope.onmessage = null;
    report(await run(e.data.args, report, e.data.grant));
  };
  scope.postMessage({ ready: true });
}

/** The grant as the start-up log shows it. */
export function describeGrant(grant: NetGrant | null): string {
  if (grant === null) {
    const all = Deno.permissions.querySync({ name: "net" }).state === "granted";
    return all ? "process: --allow-net (not narrowed)" : "process: the --allow-net list given";
  }
  return grant.mode === "narrow" ? `narrow: ${grant.allow.join(",")}` : `process: ${grant.why}`;
}
