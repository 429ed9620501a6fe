/**
 * An in-memory mesh of many routers under fake time: `MeshNode`s on a `MemoryNetwork`, with
 * helpers to crash, restart, slow and partition them and to ask what each one believes.
 */

import client from "prom-client";
import { createLogger, type Logger, silentLogger } from "../lib/core/log.ts";
import type { MemberStatus } from "../lib/mesh/member.ts";
import { MeshMetrics } from "../lib/mesh/mesh_metrics.ts";
import { MeshNode } from "../lib/mesh/node.ts";
import { FakeClock } from "../lib/core/clock.ts";
import { defaultSwimConfig, type SwimConfig } from "../lib/mesh/swim_config.ts";
import { MemoryNetwork } from "../lib/mesh/transport/memory.ts";

/** Default stream settings for tests. */
export const TEST_STREAMS = {
  heartbeatMs: 15_000,
  idleTimeoutMs: 60_000,
  queueSize: 128,
  reopenBackoffMs: 1000,
};

/** One router of the cluster. */
export interface ClusterNode {
  /** Name. */
  name: string;
  /** Address. */
  address: string;
  /** The router (replaced on restart). */
  node: MeshNode;
  /** Its metrics. */
  metrics: MeshMetrics;
  /** Its registry. */
  registry: client.Registry;
  /** Whether it runs. */
  up: boolean;
}

/** Options of a cluster. */
export interface ClusterOptions {
  /** SWIM overrides. */
  swim?: Partial<SwimConfig>;
  /** Network seed. */
  seed?: number;
  /** Log to stderr (debugging). */
  log?: boolean;
}

/** A fake-time mesh. */
export class Cluster {
  readonly clock = new FakeClock(0);
  readonly net: MemoryNetwork;
  readonly nodes = new Map<string, ClusterNode>();
  readonly #opts: ClusterOptions;
  #log: Logger;
  #seq = 0;

  /** An empty cluster. */
  constructor(opts: ClusterOptions = {}) {
    this.#opts = opts;
    this.net = new MemoryNetwork(this.clock, opts.seed ?? 7);
    this.#log = opts.log ? createLogger({ level: "debug" }) : silentLogger;
  }

  /** Adds and starts a router named `name` joining through `seeds` (names of other routers). */
  async add(name: string, seeds: string[] = [], address = `${name}:7946`): Promise<ClusterNode> {
    const registry = new client.Registry();
    const metrics = new MeshMetrics(registry);
    const node = new MeshNode({
      name,
      address,
      seeds: seeds.map((s) => this.nodes.get(s)?.address ?? s),
      swim: { ...defaultSwimConfig(), ...this.#opts.swim },
      streams: TEST_STREAMS,
      transport: this.net.transport(address),
      clock: this.clock,
      log: this.#log.child({ node: name }),
      metrics,
      randomSeed: 1000 + this.#seq++,
    });
    const c: ClusterNode = { name, address, node, metrics, registry, up: true };
    this.nodes.set(name, c);
    await node.start();
    return c;
  }

  /** Starts `n` routers r00, r01, ... each joining through r00. */
  async grow(n: number, prefix = "r"): Promise<string[]> {
    const names: string[] = [];
    const width = String(n - 1).length;
    for (let i = 0; i < n; i++) {
      const name = `${prefix}${String(i).padStart(width, "0")}`;
      await this.add(name, i === 0 ? [] : [names[0]]);
      names.push(name);
    }
    return names;
  }

  /** Cuts `name` off without closing anything (a hung host: no resets, just silence). */
  isolate(name: string): void {
    const a = this.nodes.get(name)!.address;
    this.net.partition(
      [a],
      [...this.nodes.values()].filter((c) => c.name !== name).map((c) => c.address),
    );
  }

  /** Crashes `name`: no leave, its connections drop. */
  async kill(name: string): Promise<void> {
    const c = this.nodes.get(name)!;
    c.up = false;
    await c.node.stop();
  }

  /** Restarts a crashed router with the same name and address. */
  async restart(name: string, seeds: string[]): Promise<ClusterNode> {
    const old = this.nodes.get(name)!;
    return await this.add(name, seeds, old.address);
  }

  /** What `observer` believes about `subject` (null when unknown). */
  statusOf(observer: string, subject: string): MemberStatus | null {
    return this.nodes.get(observer)!.node.statusOf(subject);
  }

  /** Running routers. */
  live(): ClusterNode[] {
    return [...this.nodes.values()].filter((c) => c.up);
  }

  /** Whether every running router sees every running router ALIVE. */
  converged(): boolean {
    const live = this.live();
    return live.every((o) => live.every((s) => this.statusOf(o.name, s.name) === "ALIVE"));
  }

  /** Whether every running router (but `except`) sees `subject` in `status` (null = unknown). */
  allSee(subject: string, status: MemberStatus | null, except: string[] = []): boolean {
    return this.live().filter((c) => c.name !== subject && !except.includes(c.name)).every((c) =>
      this.statusOf(c.name, subject) === status
    );
  }

  /** Runs fake time until `cond` or `limitMs`; returns the elapsed ms, or null if it never held. */
  waitFor(cond: () => boolean, limitMs: number, step = 10): number | null {
    const t0 = this.clock.now();
    return this.clock.advanceUntil(cond, limitMs, step) ? this.clock.now() - t0 : null;
  }

  /** Stops every router. */
  async stop(): Promise<void> {
    for (const c of this.live()) await c.node.stop();
  }
}
