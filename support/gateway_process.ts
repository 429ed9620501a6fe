/**
 * Runs the gateway as a child process (from source or from the bundle) and reads the address it
 * prints, for tests of the real command line, signals and exit codes; also `smg sim-worker`.
 */

import { freePort } from "../lib/core/free_port.ts";

/** A gateway child process. */
export interface GatewayProcess {
  /** The child. */
  child: Deno.ChildProcess;
  /** Base URL it listens on. */
  url: string;
  /** Everything it wrote to stderr so far. */
  stderr: () => string;
  /** Resolves with the exit code. */
  exited: Promise<number>;
  /**
   * Resolves with the first match of `re` in stderr from offset `from` on (default 0); rejects
   * after `limitMs` (default 30 s) so a broken test fails instead of hanging.
   */
  waitForOutput(re: RegExp, from?: number, limitMs?: number): Promise<RegExpExecArray>;
}

/**
 * Permission and runtime flags the gateway runs with (the same as `deno task start`, whose
 * `--allow-read` of the program's own modules `spawnGateway` adds for the script it runs): a
 * global `--allow-net` that the launcher narrows for the gateway's thread.
 */
export const RUN_FLAGS = [
  "--unstable-no-legacy-abort",
  "--unstable-worker-options",
  "--allow-net",
  "--deny-net=169.254.0.0/16,[fd00:ec2::254]",
  "--allow-env=RUST_LOG,SMG_LOG,LOG_TOKENS,LOG_STREAM,GRPC_NODE_VERBOSITY,GRPC_VERBOSITY," +
  "GRPC_NODE_TRACE,GRPC_TRACE," +
  "GRPC_SSL_CIPHER_SUITES,GRPC_DEFAULT_SSL_ROOTS_FILE_PATH,GRPC_NODE_USE_ALTERNATIVE_RESOLVER," +
  "GRPC_NODE_DEBUG_SEND_ERROR_DETAILS,GRPC_EXPERIMENTAL_ENABLE_OUTLIER_DETECTION,OTEL_*",
  "--allow-sys=networkInterfaces,ca",
];

/** `--allow-read` of the modules `script` loads: the source tree for main.ts, else the file. */
export function ownModulesRead(script: string): string {
  const path = script.startsWith("file:") ? new URL(script).pathname : script;
  if (!path.endsWith("/main.ts")) return `--allow-read=${path}`;
  const root = path.slice(0, -"main.ts".length);
  return `--allow-read=${["main.ts", "lib", "proto", "deno.json"].map((p) => root + p).join(",")}`;
}

/**
 * `RUN_FLAGS` and the read of `script`'s own modules, with `extraFlags`: an `--allow-env` among
 * them replaces ours (Deno takes one); an `--allow-read` list gets the program's modules added.
 */
export function runFlags(script: string, extraFlags: string[] = []): string[] {
  return [
    ...[...RUN_FLAGS, ownModulesRead(script)].filter((f) => {
      const flag = f.replace(/=.*/, "");
      return !extraFlags.some((x) => x.replace(/=.*/, "") === flag);
    }),
    ...extraFlags.map((f) =>
      f.startsWith("--allow-read=") ? `${f},${ownModulesRead(script).slice(13)}` : f
    ),
  ];
}

/** Starts `deno run <script> <args>` in `cwd` and waits for its "smg listening" line. */
export async function spawnGateway(
  script: string,
  args: string[],
  cwd?: string,
  extraFlags: string[] = [],
): Promise<GatewayProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...runFlags(script, extraFlags), script, ...args],
    cwd,
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let text = "";
  const dec = new TextDecoder();
  const waiters: { re: RegExp; from: number; resolve: (m: RegExpExecArray) => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) {
      const m = w.re.exec(text.slice(w.from));
      if (!m) continue;
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(m);
    }
  };
  const { promise: listening, resolve, reject } = Promise.withResolvers<string>();
  const pump = (async () => {
    for await (const chunk of child.stderr) {
      text += dec.decode(chunk);
      const m = /msg="smg listening" addr=(\S+)/.exec(text);
      if (m) resolve(m[1]);
      check();
    }
    reject(new Error(`gateway exited before listening:\n${text}`));
  })();
  const exited = child.status.then(async (s) => {
    await pump;
    return s.code;
  });
  const url = await listening;
  const waitForOutput = (re: RegExp, from = 0, limitMs = 30_000) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.splice(waiters.findIndex((w) => w.resolve === done), 1);
        reject(new Error(`no ${re} in the gateway's output within ${limitMs} ms:\n${text}`));
      }, limitMs);
      const done = (m: RegExpExecArray) => {
        clearTimeout(timer);
        resolve(m);
      };
      waiters.push({ re, from, resolve: done });
      check();
    });
  return { child, url, stderr: () => text, exited, waitForOutput };
}

/** Where `gatewayListenArgs` puts a gateway's metrics port. */
export interface ListenOptions {
  /** The metrics port on 127.0.0.1 (default 0: any free port). */
  metricsPort?: number;
}

/**
 * The listen flags of a loopback gateway: its main port on 127.0.0.1 (0: any free port, as the
 * "smg listening" line says) and its metrics port on 127.0.0.1.
 */
export function gatewayListenArgs(o: ListenOptions = {}): string[] {
  return [
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--prometheus-host",
    "127.0.0.1",
    "--prometheus-port",
    String(o.metricsPort ?? 0),
  ];
}

/**
 * Command-line flags of a loopback mesh router for process tests: its own main, metrics and
 * mesh ports, `name`, and seeds (`host:port`).
 */
export function meshRouterArgs(
  name: string,
  meshPort: number,
  seeds: string[],
  metricsPort = freePort(),
): string[] {
  return [
    ...gatewayListenArgs({ metricsPort }),
    "--policy",
    "round_robin",
    "--shutdown-grace-period-secs",
    "0",
    "--enable-mesh",
    "--mesh-server-name",
    name,
    "--mesh-host",
    "127.0.0.1",
    "--mesh-advertise-host",
    "127.0.0.1",
    "--mesh-port",
    String(meshPort),
    ...(seeds.length ? ["--mesh-peer-urls", ...seeds] : []),
  ];
}

/**
 * The command line of `smg serve --backend sim --connection-mode grpc` from `main` (this
 * repository's `main.ts`): `dpSize` in-process simulated gRPC workers that answer at once, the
 * gateway on 127.0.0.1:`port`, then `extra` flags (`--router-*` for the gateway).
 */
export function simGrpcServeCommand(
  main: string,
  port: number,
  dpSize: number,
  extra: string[] = [],
): string[] {
  return [
    Deno.execPath(),
    "run",
    "--unstable-no-legacy-abort",
    "--allow-net=127.0.0.1",
    "--allow-env",
    "--allow-read",
    "--allow-write=/tmp",
    main,
    "serve",
    "--backend",
    "sim",
    "--connection-mode",
    "grpc",
    "--dp-size",
    String(dpSize),
    "--worker-base-port",
    "0",
    "--time-scale",
    "0",
    "--port",
    String(port),
    ...extra,
  ];
}

/** Whether `cmd --version` (or `cmd ...args`) runs: a Debian package the CI installs. */
export function hasCommand(cmd: string, args = ["--version"]): boolean {
  try {
    return new Deno.Command(cmd, { args, stdout: "null", stderr: "null" })
      .outputSync().code === 0;
  } catch {
    return false;
  }
}

/** Runs `openssl ...args` in `dir`; throws with its stderr when it fails. */
export async function openssl(dir: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  if (out.code !== 0) {
    throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/**
 * `smg sim-worker` (from `main`) with `args`, allowed to read `dir`: resolves with its log once a
 * line contains `ready`, and `stop`, which asks it to exit (SIGTERM) and expects a clean exit.
 */
export async function spawnSimWorker(
  main: string,
  dir: string,
  args: string[],
  ready: string,
): Promise<{ log: string; stop(): Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--unstable-no-legacy-abort",
      "--allow-net=127.0.0.1",
      "--allow-env",
      `--allow-read=${dir}`,
      main,
      "sim-worker",
      ...args,
    ],
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let log = "";
  while (!log.includes(ready)) {
    const r = await reader.read();
    if (r.done) throw new Error(`sim-worker exited:\n${log}`);
    log += r.value;
  }
  return {
    log,
    async stop() {
      child.kill("SIGTERM");
      await reader.cancel();
      const { code } = await child.status;
      if (code !== 0) throw new Error(`sim-worker exited with ${code}:\n${log}`);
    },
  };
}
