/**
 * Connections lost while the main port's certificate is swapped, the two ways a Deno process
 * can do it: `reuse-port`, a new `Deno.listenTls` on the same port (SO_REUSEPORT) and the old
 * one closed, which is all `Deno.listenTls` and `Deno.serve` allow; and `in-place`, the
 * `node:tls` listener the gateway uses (`lib/front/tls_listener.ts`), whose secure context is
 * replaced while the listening socket stays. `--clients` loops each open a new TLS connection
 * per request (`connection: close`) to a trivial HTTP answer while the certificate is swapped
 * every `--every` answers, `--swaps` times; a request counts as lost when its connection is
 * reset or refused. Needs the openssl command.
 *
 *   deno run --unstable-net --allow-net=127.0.0.1 --allow-read=/tmp --allow-write=/tmp \
 *     --allow-run=openssl bench/tls_swap.ts [--clients 16] [--swaps 200] [--every 50]
 */

import { TlsTerminator } from "../lib/front/tls_listener.ts";
import { makePki, type Pair } from "../support/certs.ts";

const args = Object.fromEntries(
  Deno.args.flatMap((a, i, all) => a.startsWith("--") ? [[a.slice(2), all[i + 1]]] : []),
);
const CLIENTS = Number(args.clients ?? 16);
const SWAPS = Number(args.swaps ?? 200);
const EVERY = Number(args.every ?? 50);

const enc = new TextEncoder();
const ANSWER = enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");

/** A server that swaps its certificate to the given pair. */
interface Swappable {
  port: number;
  swap(p: Pair): void;
  close(): Promise<void>;
}

/** Answers one request per connection on a Deno TLS listener. */
async function serveDeno(l: Deno.TlsListener): Promise<void> {
  for (;;) {
    let c: Deno.Conn;
    try {
      c = await l.accept();
    } catch {
      return;
    }
    (async () => {
      try {
        if (await c.read(new Uint8Array(4096))) await c.write(ANSWER);
      } catch { /* the client left */ }
      try {
        c.close();
      } catch { /* closed */ }
    })();
  }
}

function reusePort(first: Pair): Swappable {
  const open = (p: Pair, port: number) =>
    Deno.listenTls(
      {
        hostname: "127.0.0.1",
        port,
        cert: p.certPem,
        key: p.keyPem,
        reusePort: true,
      } as Deno.ListenTlsOptions & Deno.TlsCertifiedKeyPem,
    );
  let l = open(first, 0);
  const port = (l.addr as Deno.NetAddr).port;
  const loops = [serveDeno(l)];
  return {
    port,
    swap(p) {
      const next = open(p, port);
      loops.push(serveDeno(next));
      const old = l;
      l = next;
      old.close();
    },
    async close() {
      l.close();
      await Promise.all(loops);
    },
  };
}

async function inPlace(first: Pair): Promise<Swappable> {
  const t = await TlsTerminator.listen(
    { hostname: "127.0.0.1", port: 0, cert: first.certPem, key: first.keyPem },
    (s) => {
      s.once("data", () => s.end(ANSWER));
      s.on("error", () => {});
    },
  );
  return {
    port: t.addr.port,
    swap: (p) => t.setCertificate({ cert: p.certPem, key: p.keyPem }),
    async close() {
      t.close();
      await t.closed();
    },
  };
}

async function run(name: string, s: Swappable, pairs: Pair[], cas: string[]) {
  let ok = 0;
  let swaps = 0;
  const lost = new Map<string, number>();
  const client = async () => {
    while (swaps < SWAPS) {
      try {
        const c = await Deno.connectTls({ hostname: "127.0.0.1", port: s.port, caCerts: cas });
        await c.write(enc.encode("GET / HTTP/1.1\r\nhost: b\r\n\r\n"));
        let text = "";
        const buf = new Uint8Array(4096);
        for (;;) {
          const n = await c.read(buf);
          if (n === null) break;
          text += new TextDecoder().decode(buf.subarray(0, n));
        }
        c.close();
        if (!text.endsWith("ok")) throw new Error("short answer");
        ok++;
      } catch (e) {
        const why = (e as Error).message.slice(0, 50);
        lost.set(why, (lost.get(why) ?? 0) + 1);
      }
      if ((ok + [...lost.values()].reduce((a, b) => a + b, 0)) % EVERY === 0 && swaps < SWAPS) {
        s.swap(pairs[swaps++ % 2]);
      }
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, client));
  const secs = (performance.now() - t0) / 1000;
  await s.close();
  const n = [...lost.values()].reduce((a, b) => a + b, 0);
  console.log(
    `| ${name} | ${SWAPS} | ${ok + n} | ${n} | ${(100 * n / (ok + n)).toFixed(2)} % | ` +
      `${[...lost].map(([k, v]) => `${v}× ${k}`).join("; ") || "-"} | ${secs.toFixed(1)} s |`,
  );
}

const pki = await makePki();
try {
  const pairs = [pki.server2, pki.server];
  const cas = [pki.caPem, pki.ca2Pem];
  console.log(`${CLIENTS} clients, a swap every ${EVERY} connections`);
  console.log("| swap | swaps | connections | lost | share | errors | time |");
  console.log("| --- | --- | --- | --- | --- | --- | --- |");
  await run("reuse-port (Deno.listenTls)", reusePort(pki.server), pairs, cas);
  await run("in-place (node:tls)", await inPlace(pki.server), pairs, cas);
} finally {
  await pki.remove();
}
