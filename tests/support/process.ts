/**
 * Runs the gateway as a child process (from source or from the bundle) and reads the address it
 * prints, for tests of the real command line, signals and exit codes.
 */

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
}

/** Permission and runtime flags the gateway runs with (the same as `deno task start`). */
export const RUN_FLAGS = [
  "--unstable-no-legacy-abort",
  "--allow-net",
  "--allow-env=RUST_LOG,SMG_LOG",
];

/** Starts `deno run <script> <args>` in `cwd` and waits for its "smg listening" line. */
export async function spawnGateway(
  script: string,
  args: string[],
  cwd?: string,
): Promise<GatewayProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...RUN_FLAGS, script, ...args],
    cwd,
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let text = "";
  const dec = new TextDecoder();
  const { promise: listening, resolve, reject } = Promise.withResolvers<string>();
  const pump = (async () => {
    for await (const chunk of child.stderr) {
      text += dec.decode(chunk);
      const m = /msg="smg listening" addr=(\S+)/.exec(text);
      if (m) resolve(m[1]);
    }
    reject(new Error(`gateway exited before listening:\n${text}`));
  })();
  const exited = child.status.then(async (s) => {
    await pump;
    return s.code;
  });
  const url = await listening;
  return { child, url, stderr: () => text, exited };
}
