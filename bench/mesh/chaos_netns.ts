/**
 * The chaos bench's network: one namespace per router (`smgc-0`..), each with a veth `eth0`
 * holding 10.213.0.(i+1)/24, whose peer `h<i>` sits on the bridge `br0` of a hub namespace
 * (`smgc-hub`). Nothing is configured in the root namespace and no address exists outside
 * those namespaces; IPv6 is off in all of them so the kernel sends no solicitations of its own.
 * Loss is `tc netem` on each router's `eth0` where the kernel has it, else (this machine's kernel
 * has no `sch_netem`) an nftables `numgen random` drop on the netdev ingress of `h<i>`, which
 * drops the same packets: those router i transmits, before anyone receives them. Byte counters
 * are the router-side veth's, read with `ip netns exec`.
 * Known gap: one loss rate for every router; no delay or reordering.
 */

import type { ProcessGroup } from "./chaos_proc.ts";

/** Options of the testbed. */
export interface TestbedOptions {
  /** Router namespaces to create (default 5). */
  size?: number;
  /** Namespace name prefix; stale ones with it are deleted (default "smgc"). */
  prefix?: string;
  /** First three octets of the /24 (default "10.213.0"). */
  subnet?: string;
}

/** How loss is applied. */
export type LossMethod = "netem" | "nft-numgen";

/** What the loss rules did to one router's transmissions. */
export interface LossStats {
  /** Router index. */
  router: number;
  /** Packets the router sent into the loss rule. */
  packets: number;
  /** Packets dropped. */
  dropped: number;
}

/** Byte counters of one router's `eth0`. */
export interface Counters {
  /** Bytes sent. */
  tx: number;
  /** Bytes received. */
  rx: number;
}

/** Deletes namespaces named `<prefix>-*` left by an earlier run, killing their processes. */
export async function cleanStale(procs: ProcessGroup, prefix = "smgc"): Promise<string[]> {
  const list = await procs.must("ip", ["netns", "list"]);
  const stale = list.split("\n").map((l) => l.split(" ")[0]).filter((n) =>
    n.startsWith(`${prefix}-`)
  );
  for (const ns of stale) {
    const pids = (await procs.run("ip", ["netns", "pids", ns])).stdout.split(/\s+/).filter(Boolean);
    for (const pid of pids) {
      try {
        Deno.kill(Number(pid), "SIGKILL");
      } catch { /* gone */ }
    }
    await procs.run("ip", ["netns", "del", ns]);
  }
  return stale;
}

/** The namespaces, bridge and veths of one bench run. */
export class Testbed {
  readonly size: number;
  readonly prefix: string;
  readonly #subnet: string;
  readonly #procs: ProcessGroup;
  readonly #created: string[] = [];
  #loss: LossMethod | null = null;

  /** A testbed that does not exist yet: call `create`. */
  constructor(procs: ProcessGroup, opts: TestbedOptions = {}) {
    this.#procs = procs;
    this.size = opts.size ?? 5;
    this.prefix = opts.prefix ?? "smgc";
    this.#subnet = opts.subnet ?? "10.213.0";
  }

  /** Namespace of router `i`. */
  ns(i: number): string {
    return `${this.prefix}-${i}`;
  }

  /** Address of router `i`. */
  address(i: number): string {
    return `${this.#subnet}.${i + 1}`;
  }

  /** `ip netns exec` arguments that run `cmd args` in router `i`'s namespace. */
  exec(i: number, cmd: string, args: string[]): string[] {
    return ["netns", "exec", this.ns(i), cmd, ...args];
  }

  get #hub(): string {
    return `${this.prefix}-hub`;
  }

  async #ip(...args: string[]): Promise<void> {
    await this.#procs.must("ip", args);
  }

  async #addNs(ns: string): Promise<void> {
    await this.#ip("netns", "add", ns);
    this.#created.push(ns);
    await this.#ip("-n", ns, "link", "set", "lo", "up");
    await this.#procs.must("ip", [
      ...["netns", "exec", ns, "sysctl", "-qw"],
      ...["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"],
    ]);
  }

  /** Creates the hub, its bridge and every router namespace with its veth and address. */
  async create(): Promise<void> {
    const hub = this.#hub;
    await this.#addNs(hub);
    await this.#ip("-n", hub, "link", "add", "br0", "type", "bridge");
    await this.#ip("-n", hub, "link", "set", "br0", "up");
    for (let i = 0; i < this.size; i++) {
      const ns = this.ns(i);
      await this.#addNs(ns);
      await this.#ip(
        "-n",
        ns,
        "link",
        "add",
        "eth0",
        "type",
        "veth",
        "peer",
        `h${i}`,
        "netns",
        hub,
      );
      await this.#ip("-n", hub, "link", "set", `h${i}`, "master", "br0");
      await this.#ip("-n", hub, "link", "set", `h${i}`, "up");
      await this.#ip("-n", ns, "addr", "add", `${this.address(i)}/24`, "dev", "eth0");
      await this.#ip("-n", ns, "link", "set", "eth0", "up");
    }
  }

  /** Deletes every namespace it created (their veths, qdiscs and rules go with them). */
  async destroy(): Promise<void> {
    for (const ns of this.#created.splice(0).reverse()) {
      await this.#procs.run("ip", ["netns", "del", ns]);
    }
  }

  /** Drops `pct` % of what every router transmits; says how. */
  async setLoss(pct: number): Promise<LossMethod> {
    const netem = await this.#procs.run("tc", [
      ...["-n", this.ns(0), "qdisc", "add", "dev", "eth0", "root", "netem", "loss", `${pct}%`],
    ]);
    if (netem.code === 0) {
      for (let i = 1; i < this.size; i++) {
        await this.#procs.must("tc", [
          ...["-n", this.ns(i), "qdisc", "add", "dev", "eth0", "root", "netem", "loss", `${pct}%`],
        ]);
      }
      return this.#loss = "netem";
    }
    const perTenThousand = Math.round(pct * 100);
    const chains = [...Array(this.size).keys()].map((i) =>
      `counter h${i}_all {}\ncounter h${i}_drop {}\n` +
      `chain h${i} { type filter hook ingress device "h${i}" priority 0; ` +
      `counter name "h${i}_all"; numgen random mod 10000 < ${perTenThousand} ` +
      `counter name "h${i}_drop" drop; }\n`
    );
    const file = await Deno.makeTempFile({ prefix: "smgc-loss-", suffix: ".nft" });
    try {
      await Deno.writeTextFile(file, `table netdev smgc_loss {\n${chains.join("")}}\n`);
      await this.#procs.must("ip", ["netns", "exec", this.#hub, "nft", "-f", file]);
    } finally {
      await Deno.remove(file);
    }
    return this.#loss = "nft-numgen";
  }

  /** Packets each router sent into the loss rule and how many were dropped. */
  async lossStats(): Promise<LossStats[]> {
    const out: LossStats[] = [];
    if (this.#loss === "netem") {
      for (let i = 0; i < this.size; i++) {
        const j = JSON.parse(
          await this.#procs.must("tc", [
            "-s",
            "-j",
            "-n",
            this.ns(i),
            "qdisc",
            "show",
            "dev",
            "eth0",
          ]),
        ) as { kind: string; packets: number; drops: number }[];
        const q = j.find((q) => q.kind === "netem");
        out.push({
          router: i,
          packets: (q?.packets ?? 0) + (q?.drops ?? 0),
          dropped: q?.drops ?? 0,
        });
      }
    } else if (this.#loss === "nft-numgen") {
      const j = JSON.parse(
        await this.#procs.must("ip", ["netns", "exec", this.#hub, "nft", "-j", "list", "counters"]),
      ) as { nftables: { counter?: { name: string; packets: number } }[] };
      const count = new Map(
        j.nftables.flatMap((e) => e.counter ? [[e.counter.name, e.counter.packets]] : []),
      );
      for (let i = 0; i < this.size; i++) {
        out.push({
          router: i,
          packets: count.get(`h${i}_all`) ?? 0,
          dropped: count.get(`h${i}_drop`) ?? 0,
        });
      }
    }
    return out;
  }

  /** Removes the loss again. */
  async clearLoss(): Promise<void> {
    if (this.#loss === "netem") {
      for (let i = 0; i < this.size; i++) {
        await this.#procs.run("tc", ["-n", this.ns(i), "qdisc", "del", "dev", "eth0", "root"]);
      }
    } else if (this.#loss === "nft-numgen") {
      await this.#procs.run("ip", [
        "netns",
        "exec",
        this.#hub,
        "nft",
        "delete",
        "table",
        "netdev",
        "smgc_loss",
      ]);
    }
    this.#loss = null;
  }

  /** Byte counters of every router's `eth0`, read from sysfs inside its namespace. */
  async counters(): Promise<Counters[]> {
    const out: Counters[] = [];
    for (let i = 0; i < this.size; i++) {
      const base = "/sys/class/net/eth0/statistics";
      const text = await this.#procs.must(
        "ip",
        this.exec(i, "cat", [`${base}/tx_bytes`, `${base}/rx_bytes`]),
      );
      const [tx, rx] = text.trim().split(/\s+/).map(Number);
      out.push({ tx, rx });
    }
    return out;
  }
}
