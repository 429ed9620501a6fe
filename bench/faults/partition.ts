/**
 * A real network partition of one process on loopback, without network namespaces: the process
 * starts inside a cgroup v2 of its own, and a cut is an nftables table that drops every packet
 * of that process's TCP connections, both ways, on their way in (every loopback packet passes
 * `input`): the process's sockets are recognised with `socket cgroupv2` (its own sends on
 * `output`, what reaches its sockets on `input`) and their connections with a conntrack mark,
 * so the other end's packets are dropped too. Nothing is refused or reset: packets vanish, as
 * across a broken link, and TCP retransmits until the table is gone. A cut may be narrowed to
 * some ports (`only`): the mesh's connections only, say, while clients and workers still reach
 * the process.
 *
 * Each cut is its own table with its own mark, deleted at `heal`; conntrack entries marked by
 * an earlier cut keep a mark no table drops. Needs root, `nft` and a cgroup v2 hierarchy under
 * `/sys/fs/cgroup` (this machine's hybrid layout mounts it at `/sys/fs/cgroup/unified`):
 * `Partition.open` says why not otherwise.
 */

const CGROUP_ROOT = "/sys/fs/cgroup";
/** Cgroups are `<prefix><pid>`, tables `<TABLE_PREFIX><pid>_<n>`: the pid of the bench. */
const CGROUP_PREFIX = "smg-faults-";
const TABLE_PREFIX = "smg_partition_";

async function run(cmd: string, args: string[], stdin?: string): Promise<string> {
  const p = new Deno.Command(cmd, {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await p.output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b).trim();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")}: ${text(out.stderr)}`);
  return text(out.stdout);
}

async function alive(pid: string): Promise<boolean> {
  return await run("cat", [`/proc/${pid}/stat`]).then(() => true, () => false);
}

/** Deletes the partition tables and cgroups of bench runs that are no longer running. */
async function removeStale(mount: string): Promise<void> {
  const tables = await run("nft", ["list", "tables"]);
  for (
    const [, name, pid] of tables.matchAll(
      new RegExp(`^table inet (${TABLE_PREFIX}(\\d+)_\\d+)$`, "gm"),
    )
  ) {
    if (!(await alive(pid))) await run("nft", ["delete", "table", "inet", name]).catch(() => {});
  }
  for (const entry of (await run("ls", [mount])).split("\n")) {
    const pid = entry.startsWith(CGROUP_PREFIX) ? entry.slice(CGROUP_PREFIX.length) : "";
    if (/^\d+$/.test(pid) && !(await alive(pid))) {
      await run("rmdir", [`${mount}/${entry}`]).catch(() => {});
    }
  }
}

/** Which of a cut process's connections to drop: those with one of these ports at its end. */
export interface CutPorts {
  /** Ports the process listens on (connections to them). */
  own: number[];
  /** Ports of others (the process's connections to them). */
  remote: number[];
}

/** What a cut dropped. */
export interface CutStats {
  /** Packets dropped while it was in place. */
  dropped: number;
}

/** One process's partition: its cgroup, and the cut in place if any. */
export class Partition {
  readonly #dir: string;
  /** The cgroup's path as nftables names it (relative to `/sys/fs/cgroup`). */
  readonly #nftPath: string;
  #cuts = 0;
  #table: string | null = null;

  private constructor(dir: string, nftPath: string) {
    this.#dir = dir;
    this.#nftPath = nftPath;
  }

  /**
   * A fresh cgroup (named after this process), or why a partition cannot be made here. First
   * removes the tables and cgroups an earlier run left behind (a run stopped by a signal exits
   * without healing) when the process that made them is gone.
   */
  static async open(): Promise<Partition | { skip: string }> {
    if (Deno.uid() !== 0) return { skip: "not root (cgroups and nftables need it)" };
    try {
      await run("nft", ["--version"]);
    } catch {
      return { skip: "no nft (apt-get install nftables)" };
    }
    const mounts = await run("cat", ["/proc/self/mounts"]);
    const mount = mounts.split("\n").map((l) => l.split(" ")).find((f) => f[2] === "cgroup2")?.[1];
    if (!mount || !(mount === CGROUP_ROOT || mount.startsWith(`${CGROUP_ROOT}/`))) {
      return { skip: `no cgroup v2 hierarchy under ${CGROUP_ROOT} (found: ${mount ?? "none"})` };
    }
    await removeStale(mount);
    const name = `${CGROUP_PREFIX}${Deno.pid}`;
    const dir = `${mount}/${name}`;
    try {
      // Through the commands: Deno asks for --allow-all to touch anything under /sys.
      await run("mkdir", ["-p", dir]);
      // What `wrap` does, once, with a shell that exits at once.
      await run("sh", ["-c", 'echo $$ > "$0"', `${dir}/cgroup.procs`]);
    } catch (e) {
      await run("rmdir", [dir]).catch(() => {});
      return { skip: `cannot start a process in a cgroup of its own: ${(e as Error).message}` };
    }
    const nftPath = `${mount.slice(CGROUP_ROOT.length + 1)}${
      mount === CGROUP_ROOT ? "" : "/"
    }${name}`;
    return new Partition(dir, nftPath);
  }

  /** `cmd` wrapped to run inside the cgroup from its first instruction (same PID, via exec). */
  wrap(cmd: string[]): string[] {
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', `${this.#dir}/cgroup.procs`, ...cmd];
  }

  /** Cuts the process off: every connection, or only those at `only`'s ports. */
  async cut(only?: CutPorts): Promise<void> {
    if (this.#table) throw new Error("already cut");
    const n = ++this.#cuts;
    const table = `${TABLE_PREFIX}${Deno.pid}_${n}`;
    const mark = `0x5347${n.toString(16).padStart(4, "0")}`;
    const sock = `socket cgroupv2 level 1 "${this.#nftPath}"`;
    const set = (ports: number[]) => {
      if (ports.length === 0) throw new Error("a narrowed cut needs ports on both sides");
      return `{ ${ports.join(", ")} }`;
    };
    // Sends: to a remote port, or from an own one. Receipts: the reverse.
    const sends = only ? [`tcp dport ${set(only.remote)}`, `tcp sport ${set(only.own)}`] : [""];
    const receipts = only ? [`tcp sport ${set(only.remote)}`, `tcp dport ${set(only.own)}`] : [""];
    await run(
      "nft",
      ["-f", "-"],
      `table inet ${table} {
  chain out {
    type filter hook output priority 0;
${sends.map((f) => `    ${sock} ${f} ct mark set ${mark}`).join("\n")}
  }
  chain in {
    type filter hook input priority 0;
${receipts.map((f) => `    ${sock} ${f} ct mark set ${mark}`).join("\n")}
    ct mark ${mark} counter drop
  }
}
`,
    );
    this.#table = table;
  }

  /** Removes the cut; what it dropped (the table stays cut if nft fails: it throws). */
  async heal(): Promise<CutStats> {
    const table = this.#table;
    if (!table) return { dropped: 0 };
    const listing = await run("nft", ["list", "table", "inet", table]).catch(() => "");
    await run("nft", ["delete", "table", "inet", table]);
    this.#table = null;
    return { dropped: Number(/counter packets (\d+) bytes \d+ drop/.exec(listing)?.[1] ?? 0) };
  }

  /** Heals, and removes the cgroup once its processes are gone (they must be stopped first). */
  async close(): Promise<void> {
    await this.heal().catch(() => {});
    await run("rmdir", [this.#dir]).catch(() => {});
  }
}
