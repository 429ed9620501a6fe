/**
 * Real ZeroMQ peers for interop tests, run by `node` with npm `zeromq@6.8.0` (libzmq) installed
 * once into /tmp/smg-zmq-node and reused: a publisher (`zmq_publisher.mjs`) for our subscriber,
 * and a subscriber with a replay DEALER (`zmq_subscriber.mjs`) for our PUB and ROUTER. Without
 * node or npm, or when the install fails, `zeromqForNode` says why and the tests that need it
 * are skipped, so a clone without them still passes.
 */

import { hasCommand } from "../../support/gateway_process.ts";
import { Waiters, within } from "../../support/wait.ts";

/** Where zeromq is installed for node, shared by test runs. */
const DIR = "/tmp/smg-zmq-node";
const VERSION = "6.8.0";

/** The folder holding node_modules/zeromq, or why the interop tests cannot run. */
export async function zeromqForNode(): Promise<{ dir: string } | { skip: string }> {
  if (!hasCommand("node")) return { skip: "node is not installed" };
  if (await loads(DIR)) return { dir: DIR };
  if (!hasCommand("npm")) return { skip: "npm is not installed" };
  // Install beside, then rename: a concurrent run never sees half an install.
  const tmp = await Deno.makeTempDir({ prefix: "smg-zmq-node-" });
  try {
    const out = await new Deno.Command("npm", {
      args: ["install", "--no-audit", "--no-fund", "--prefix", tmp, `zeromq@${VERSION}`],
      stdout: "null",
      stderr: "piped",
      signal: AbortSignal.timeout(180_000),
    }).output();
    if (out.code !== 0) {
      return {
        skip: `npm install zeromq@${VERSION} failed: ${
          new TextDecoder().decode(out.stderr).slice(-300)
        }`,
      };
    }
    await Deno.rename(tmp, DIR).catch(() => {}); // Another run may have won the race.
  } catch (e) {
    return { skip: `npm install zeromq@${VERSION} failed: ${e}` };
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
  return await loads(DIR) ? { dir: DIR } : { skip: `zeromq@${VERSION} does not load in node` };
}

/** Whether `dir` has zeromq at the pinned version and node loads it (its native part too). */
async function loads(dir: string): Promise<boolean> {
  try {
    const pkg = JSON.parse(await Deno.readTextFile(`${dir}/node_modules/zeromq/package.json`));
    if (pkg.version !== VERSION) return false;
    const out = await new Deno.Command("node", {
      args: ["-e", `require(${JSON.stringify(`${dir}/node_modules/zeromq`)})`],
      stdout: "null",
      stderr: "null",
    }).output();
    return out.code === 0;
  } catch {
    return false;
  }
}

/** How to start a publisher. */
export interface NodePublisherOptions {
  /** PUB port (default 0: any free one). */
  pubPort?: number;
  /** Replay ROUTER port (default 0). */
  replayPort?: number;
  /** Topic of every message (default "kv"). */
  topic?: string;
  /** Batches kept for replay (default 100). */
  buffer?: number;
}

type Line = Record<string, unknown>;

/**
 * A `node` process running one of the scripts beside this file: JSON commands in, one per line on
 * its stdin, and JSON lines out on its stdout, each handed to `onLine`. `ready` settles with the
 * first line `ready` picks (rejected if the process ends first or within 10 s none did); a
 * failed start is killed and reaped.
 */
class NodeScript {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #pump: Promise<void>;

  private constructor(child: Deno.ChildProcess, pump: Promise<void>) {
    this.#child = child;
    this.#pump = pump;
    this.#writer = child.stdin.getWriter();
  }

  /** Starts `script` with `args`; resolves once `ready` returns a value for one of its lines. */
  static async start<T>(
    script: string,
    args: string[],
    ready: (line: Line) => T | undefined,
    onLine: (line: Line) => void,
  ): Promise<{ node: NodeScript; ready: T }> {
    const path = new URL(`./${script}`, import.meta.url).pathname;
    const child = new Deno.Command("node", {
      args: [path, ...args],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const up = Promise.withResolvers<T>();
    const pump = (async () => {
      let buf = "";
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
        buf += chunk;
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          const line = JSON.parse(buf.slice(0, i)) as Line;
          buf = buf.slice(i + 1);
          const r = ready(line);
          if (r !== undefined) up.resolve(r);
          else onLine(line);
        }
      }
      up.reject(new Error(`${script} exited before it was ready`));
    })();
    try {
      return { node: new NodeScript(child, pump), ready: await within(up.promise, script) };
    } catch (e) {
      child.kill("SIGKILL");
      await child.status;
      await pump;
      throw e;
    }
  }

  /** Sends `cmd` as one line. */
  async send(cmd: Line): Promise<void> {
    await this.#writer.write(new TextEncoder().encode(JSON.stringify(cmd) + "\n"));
  }

  /** Kills the process (SIGKILL: no goodbye on its sockets) and waits for it. */
  async kill(): Promise<void> {
    this.#child.kill("SIGKILL");
    await this.#finish();
  }

  /**
   * Asks it to exit and waits; one that has not exited 5 s later is killed (a hang guard, not a
   * wait: the exit is awaited either way).
   */
  async close(): Promise<void> {
    const guard = setTimeout(() => this.#child.kill("SIGKILL"), 5000);
    try {
      await this.send({ op: "exit" }).catch(() => {});
      await this.#finish();
    } finally {
      clearTimeout(guard);
    }
  }

  async #finish(): Promise<void> {
    await this.#writer.close().catch(() => {});
    await this.#child.status;
    await this.#pump;
  }
}

/** A running `zmq_publisher.mjs`. */
export class NodePublisher {
  /** PUB port. */
  readonly pubPort: number;
  /** Replay ROUTER port. */
  readonly replayPort: number;
  /** Start sequence numbers of the replays it served, in order. */
  readonly replays: number[];
  readonly #node: NodeScript;
  readonly #answers: ((line: Line) => void)[];

  private constructor(
    node: NodeScript,
    ports: { pub: number; replay: number },
    answers: ((line: Line) => void)[],
    replays: number[],
  ) {
    this.#node = node;
    this.pubPort = ports.pub;
    this.replayPort = ports.replay;
    this.#answers = answers;
    this.replays = replays;
  }

  /** Starts one with zeromq from `dir` and waits until it is bound. */
  static async start(dir: string, opts: NodePublisherOptions = {}): Promise<NodePublisher> {
    const answers: ((line: Line) => void)[] = [];
    const replays: number[] = [];
    const { node, ready } = await NodeScript.start(
      "zmq_publisher.mjs",
      [
        dir,
        String(opts.pubPort ?? 0),
        String(opts.replayPort ?? 0),
        opts.topic ?? "kv",
        String(opts.buffer ?? 100),
      ],
      (line) => line.ready ? { pub: line.pub as number, replay: line.replay as number } : undefined,
      (line) => {
        if (typeof line.replay === "number") replays.push(line.replay);
        else answers.shift()?.(line);
      },
    );
    return new NodePublisher(node, ready, answers, replays);
  }

  /** tcp:// endpoint of the PUB. */
  get pubEndpoint(): string {
    return `tcp://127.0.0.1:${this.pubPort}`;
  }

  /** tcp:// endpoint of the replay ROUTER. */
  get replayEndpoint(): string {
    return `tcp://127.0.0.1:${this.replayPort}`;
  }

  /** Publishes `payload` with the next sequence number; resolves with that number. */
  publish(payload: Uint8Array): Promise<number> {
    return this.#op({ op: "publish", payload: toBase64(payload) });
  }

  /** Takes the next sequence number for `payload` and buffers it for replay without sending it. */
  drop(payload: Uint8Array): Promise<number> {
    return this.#op({ op: "drop", payload: toBase64(payload) });
  }

  /** Starts the sequence over at 0 with an empty replay buffer, as a new publisher would. */
  async reset(): Promise<void> {
    await this.#op({ op: "reset" });
  }

  /** Kills the process (SIGKILL: no goodbye on its sockets) and waits for it. */
  kill(): Promise<void> {
    return this.#node.kill();
  }

  /** Asks it to exit and waits (killing it after 5 s). */
  close(): Promise<void> {
    return this.#node.close();
  }

  async #op(cmd: Line): Promise<number> {
    const answer = new Promise<Line>((resolve) => this.#answers.push(resolve));
    await this.#node.send(cmd);
    return (await within(answer, `the publisher's answer to ${cmd.op}`)).seq as number;
  }
}

function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

/** A message as `zmq_subscriber.mjs` reports it. */
export interface NodeMessage {
  /** The topic frame, as text. */
  topic: string;
  /** The sequence frame. */
  seq: number;
  /** The payload frame. */
  payload: Uint8Array;
}

/** A running `zmq_subscriber.mjs`: libzmq's SUB on a PUB, and its DEALER for replays. */
export class NodeSubscriber {
  /** Messages received so far, in order. */
  readonly messages: NodeMessage[];
  /** Poked at each message. */
  readonly changed: Waiters;
  readonly #node: NodeScript;
  readonly #replays: ((got: [number, Uint8Array][]) => void)[];

  private constructor(
    node: NodeScript,
    messages: NodeMessage[],
    replays: ((got: [number, Uint8Array][]) => void)[],
    changed: Waiters,
  ) {
    this.#node = node;
    this.messages = messages;
    this.#replays = replays;
    this.changed = changed;
  }

  /** Starts one with zeromq from `dir`, connected to `pub` (and `replay`) and subscribed to `topic`. */
  static async start(
    dir: string,
    pub: string,
    replay: string,
    topic = "",
  ): Promise<NodeSubscriber> {
    const messages: NodeMessage[] = [];
    const replays: ((got: [number, Uint8Array][]) => void)[] = [];
    const changed = new Waiters();
    const { node } = await NodeScript.start(
      "zmq_subscriber.mjs",
      [dir, pub, topic, replay],
      (line) => line.ready ? true : undefined,
      (line) => {
        if (Array.isArray(line.replayed)) {
          const got = (line.replayed as [number, string][]).map(([s, p]) =>
            [s, fromBase64(p)] as [number, Uint8Array]
          );
          replays.shift()?.(got);
        } else {
          messages.push({
            topic: line.topic as string,
            seq: line.seq as number,
            payload: fromBase64(line.payload as string),
          });
          changed.poke();
        }
      },
    );
    return new NodeSubscriber(node, messages, replays, changed);
  }

  /** Asks the replay ROUTER for what it holds from `from` on, through libzmq's DEALER. */
  async replay(from: number): Promise<[number, Uint8Array][]> {
    const answer = new Promise<[number, Uint8Array][]>((resolve) => this.#replays.push(resolve));
    await this.#node.send({ op: "replay", from });
    return await within(answer, `a replay from ${from}`);
  }

  /** Asks it to exit and waits (killing it after 5 s). */
  close(): Promise<void> {
    return this.#node.close();
  }
}

function fromBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}
