/**
 * Real ZeroMQ peers for interop tests, run by `node` with npm `zeromq@6.8.0` (libzmq) installed
 * once into /tmp/smg-zmq-node and reused: a publisher (`zmq_publisher.mjs`) for our subscriber,
 * and a subscriber with a replay DEALER (`zmq_subscriber.mjs`) for our PUB and ROUTER. Without
 * node or npm, or when the install fails, `zeromqForNode` says why and the tests that need it
 * are skipped, so a clone without them still passes.
 */

import { hasCommand } from "./process.ts";
import { Waiters, within } from "./wait.ts";

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

/** A running `zmq_publisher.mjs`. */
export class NodePublisher {
  /** PUB port. */
  readonly pubPort: number;
  /** Replay ROUTER port. */
  readonly replayPort: number;
  /** Start sequence numbers of the replays it served, in order. */
  readonly replays: number[] = [];
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #answers: ((line: Line) => void)[] = [];
  readonly #pump: Promise<void>;
  readonly #status: Promise<Deno.CommandStatus>;

  private constructor(
    child: Deno.ChildProcess,
    ports: { pub: number; replay: number },
    pump: Promise<void>,
    answers: ((line: Line) => void)[],
    replays: number[],
  ) {
    this.#child = child;
    this.pubPort = ports.pub;
    this.replayPort = ports.replay;
    this.#pump = pump;
    this.#answers = answers;
    this.replays = replays;
    this.#writer = child.stdin.getWriter();
    this.#status = child.status;
  }

  /** Starts one with zeromq from `dir` and waits until it is bound. */
  static async start(dir: string, opts: NodePublisherOptions = {}): Promise<NodePublisher> {
    const script = new URL("./zmq_publisher.mjs", import.meta.url).pathname;
    const child = new Deno.Command("node", {
      args: [
        script,
        dir,
        String(opts.pubPort ?? 0),
        String(opts.replayPort ?? 0),
        opts.topic ?? "kv",
        String(opts.buffer ?? 100),
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const answers: ((line: Line) => void)[] = [];
    const replays: number[] = [];
    const ready = Promise.withResolvers<{ pub: number; replay: number }>();
    const pump = (async () => {
      let buf = "";
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
        buf += chunk;
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          const line = JSON.parse(buf.slice(0, i)) as Line;
          buf = buf.slice(i + 1);
          if (line.ready) ready.resolve({ pub: line.pub as number, replay: line.replay as number });
          else if (typeof line.replay === "number") replays.push(line.replay);
          else answers.shift()?.(line);
        }
      }
      ready.reject(new Error("the publisher exited before it was bound"));
    })();
    const timer = setTimeout(
      () => ready.reject(new Error("the publisher did not bind in 10 s")),
      10_000,
    );
    try {
      const ports = await ready.promise;
      return new NodePublisher(child, ports, pump, answers, replays);
    } catch (e) {
      child.kill("SIGKILL");
      await child.status;
      await pump;
      throw e;
    } finally {
      clearTimeout(timer);
    }
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
  async kill(): Promise<void> {
    this.#child.kill("SIGKILL");
    await this.#finish();
  }

  /** Asks it to exit and waits (killing it after 5 s). */
  async close(): Promise<void> {
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), 5000);
    try {
      await this.#writer.write(new TextEncoder().encode('{"op":"exit"}\n')).catch(() => {});
      await this.#finish();
    } finally {
      clearTimeout(timer);
    }
  }

  async #finish(): Promise<void> {
    await this.#writer.close().catch(() => {});
    await this.#status;
    await this.#pump;
  }

  async #op(cmd: Line): Promise<number> {
    const answer = new Promise<Line>((resolve) => this.#answers.push(resolve));
    await this.#writer.write(new TextEncoder().encode(JSON.stringify(cmd) + "\n"));
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
  readonly messages: NodeMessage[] = [];
  /** Poked at each message. */
  readonly changed = new Waiters();
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #replays: ((got: [number, Uint8Array][]) => void)[];
  readonly #pump: Promise<void>;

  private constructor(
    child: Deno.ChildProcess,
    pump: Promise<void>,
    messages: NodeMessage[],
    replays: ((got: [number, Uint8Array][]) => void)[],
    changed: Waiters,
  ) {
    this.#child = child;
    this.#pump = pump;
    this.messages = messages;
    this.#replays = replays;
    this.changed = changed;
    this.#writer = child.stdin.getWriter();
  }

  /** Starts one with zeromq from `dir`, connected to `pub` (and `replay`) and subscribed to `topic`. */
  static async start(
    dir: string,
    pub: string,
    replay: string,
    topic = "",
  ): Promise<NodeSubscriber> {
    const script = new URL("./zmq_subscriber.mjs", import.meta.url).pathname;
    const child = new Deno.Command("node", {
      args: [script, dir, pub, topic, replay],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const messages: NodeMessage[] = [];
    const replays: ((got: [number, Uint8Array][]) => void)[] = [];
    const changed = new Waiters();
    const ready = Promise.withResolvers<void>();
    const pump = (async () => {
      let buf = "";
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
        buf += chunk;
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          const line = JSON.parse(buf.slice(0, i)) as Line;
          buf = buf.slice(i + 1);
          if (line.ready) ready.resolve();
          else if (Array.isArray(line.replayed)) {
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
        }
      }
      ready.reject(new Error("the subscriber exited before it was ready"));
    })();
    try {
      await within(ready.promise, "the node subscriber");
      return new NodeSubscriber(child, pump, messages, replays, changed);
    } catch (e) {
      child.kill("SIGKILL");
      await child.status;
      await pump;
      throw e;
    }
  }

  /** Asks the replay ROUTER for what it holds from `from` on, through libzmq's DEALER. */
  async replay(from: number): Promise<[number, Uint8Array][]> {
    const answer = new Promise<[number, Uint8Array][]>((resolve) => this.#replays.push(resolve));
    await this.#writer.write(
      new TextEncoder().encode(JSON.stringify({ op: "replay", from }) + "\n"),
    );
    return await within(answer, `a replay from ${from}`);
  }

  /** Asks it to exit and waits (killing it after 5 s). */
  async close(): Promise<void> {
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), 5000);
    try {
      await this.#writer.write(new TextEncoder().encode('{"op":"exit"}\n')).catch(() => {});
      await this.#writer.close().catch(() => {});
      await this.#child.status;
      await this.#pump;
    } finally {
      clearTimeout(timer);
    }
  }
}

function fromBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}
