/**
 * Our gateway as a benchmark target: `main.ts` with one `--policy`, in front of the fleet, pinned
 * to the target CPU; ready when `/readiness` counts every worker healthy. Also tells which
 * policies this build can run: a policy the build does not implement yet makes the gateway exit
 * 2 with "not available in this build", and is then skipped with a note.
 */

import { type Child, exited, HOST, spawn, stop, waitFor } from "../../support/processes.ts";
import { freePorts } from "../../lib/core/free_port.ts";
import type { TargetContext } from "./target_context.ts";

/** The gateway command line after `deno`, for the report and for starting it. */
export function gatewayArgs(
  root: string,
  policy: string,
  port: number,
  promPort: number,
  workers: string[],
  seed: number,
  modelPath?: string,
  flags: string[] = [],
): string[] {
  const args = gatewayCommand(root, port, promPort, seed, [
    ...(workers.length > 0 ? ["--worker-urls", ...workers] : []),
    "--policy",
    policy,
    ...flags,
    ...(modelPath ? ["--model-path", modelPath] : []),
  ]);
  // gRPC workers: grpc-js reads its GRPC_* variables, and the tokenizer is read from disk.
  return modelPath
    ? args.map((a) => a.startsWith("--allow-env") ? "--allow-env" : a)
      .toSpliced(2, 0, `--allow-read=${modelPath}`)
    : args;
}

/**
 * `main.ts` listening on `port` (metrics on `promPort`) with `--random-seed seed`, warn-level
 * logs and the gateway flags `flags` (workers and policy), after `deno`.
 */
export function gatewayCommand(
  root: string,
  port: number,
  promPort: number,
  seed: number,
  flags: string[],
): string[] {
  return [
    "run",
    "--unstable-no-legacy-abort",
    // An explicit list (the gateway's addresses, its workers' host): the gateway then runs in
    // the main thread with exactly it, as measured before the launcher narrowed global grants.
    `--allow-net=${HOST},0.0.0.0`,
    "--allow-env=RUST_LOG,SMG_LOG",
    `${root}main.ts`,
    "--host",
    HOST,
    "--port",
    String(port),
    "--prometheus-port",
    String(promPort),
    ...flags,
    "--random-seed",
    String(seed),
    "--log-level",
    "warn",
  ];
}

/**
 * Starts the gateway with `policy` (and extra gateway `flags`) in front of `c.workers` and waits
 * until all are healthy. Workers with labels (`c.labels`: KV-event endpoints) are registered
 * through `POST /workers` once it listens, as `--worker-urls` carries no labels.
 */
export async function startGateway(
  policy: string,
  c: TargetContext,
  flags: string[] = [],
): Promise<Child> {
  const promPort = c.promPort ?? freePorts(1)[0];
  const labelled = c.labels?.some((l) => Object.keys(l).length > 0) ?? false;
  const urls = labelled ? [] : c.workers;
  const child = await spawn(
    `${c.tag}-smg`,
    c.cpu,
    [
      Deno.execPath(),
      ...gatewayArgs(c.root, policy, c.port, promPort, urls, c.seed, c.modelPath, flags),
    ],
    c.dir,
    c.root,
  );
  try {
    if (labelled) {
      await waitFor(
        `gateway --policy ${policy}`,
        child,
        `http://${HOST}:${c.port}/liveness`,
        (s) => s === 200,
      );
      for (const [i, url] of c.workers.entries()) {
        const res = await fetch(`http://${HOST}:${c.port}/workers`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ url, labels: c.labels![i] }),
        });
        const text = await res.text();
        if (res.status !== 202) throw new Error(`POST /workers ${url}: ${res.status} ${text}`);
      }
    }
    await waitFor(
      `gateway --policy ${policy}`,
      child,
      `http://${HOST}:${c.port}/readiness`,
      (s, b) => s === 200 && JSON.parse(b).healthy_workers === c.workers.length,
    );
    return child;
  } catch (e) {
    await stop([child]);
    throw e;
  }
}

/** A probe that lost its port to another process: worth another try on fresh ports. */
const PORT_TAKEN = /AddrInUse|address already in use/i;

/**
 * Whether this build runs `policy`: "ok", or the reason it does not (the gateway's message).
 * Probes run in parallel on ports picked beforehand, so a start that fails because its port was
 * taken meanwhile is retried on fresh ports (up to 3 tries) rather than reported as the reason.
 */
export async function probePolicy(
  policy: string,
  dir: string,
  root: string,
  cpu: number,
): Promise<"ok" | string> {
  let why = "";
  for (let attempt = 0; attempt < 3; attempt++) {
    why = await probeOnce(policy, dir, root, cpu);
    if (!PORT_TAKEN.test(why)) return why;
  }
  return why;
}

async function probeOnce(
  policy: string,
  dir: string,
  root: string,
  cpu: number,
): Promise<"ok" | string> {
  const [port, promPort] = freePorts(2);
  // Worker URLs nothing listens on: the policy is built at start, before any worker matters.
  // Two of them, since power_of_two refuses to start with fewer.
  const args = gatewayArgs(
    root,
    policy,
    port,
    promPort,
    [`http://${HOST}:9`, `http://${HOST}:7`],
    0,
  );
  const child = await spawn(`probe-${policy}`, cpu, [Deno.execPath(), ...args], dir, root);
  try {
    for (let i = 0; i < 300; i++) {
      if (await exited(child, 100)) {
        let log = "";
        // The log is copied from the child's pipes asynchronously: give it a moment to land.
        for (let j = 0; j < 20 && !log; j++) {
          log = await Deno.readTextFile(child.log).catch(() => "");
          if (!log) await new Promise((r) => setTimeout(r, 50));
        }
        const line = log.split("\n").find((l) => PORT_TAKEN.test(l)) ??
          log.split("\n").find((l) => /not available|policy/i.test(l)) ?? log;
        return line.trim().slice(0, 300) || `exited with ${(await child.proc.status).code}`;
      }
      // Any answer (503 included: its worker never comes up) means it started with the policy.
      const answered = await fetch(`http://${HOST}:${port}/readiness`, {
        signal: AbortSignal.timeout(500),
      }).then(async (r) => {
        await r.body?.cancel();
        return true;
      }, () => false);
      if (answered) return "ok";
    }
    return "did not start within 30 s";
  } finally {
    await stop([child]);
  }
}
