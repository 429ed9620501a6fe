/**
 * The ZMTP client against a scripted peer on loopback: the handshake and what it refuses (not
 * ZMTP, old versions, other security, wrong peer types, ERROR, a silent peer past the deadline),
 * short and long frames and multipart messages, the frame and message limits (refused before
 * the body is read), PING answered with PONG, subscriptions and DEALER sends as the peer sees
 * them, and close or a peer's exit ending a pending receive.
 */

import assert from "node:assert/strict";
import { FakeClock, systemClock } from "../../lib/core/clock.ts";
import { ByteReader } from "../../lib/kv/byte_reader.ts";
import {
  encodeCommand,
  encodeFrame,
  encodeMessage,
  encodeReady,
  FLAG_COMMAND,
  FLAG_LONG,
  FLAG_MORE,
  greeting,
  parseCommand,
  parseReady,
} from "../../lib/kv/zmtp_codec.ts";
import { type ZmtpOptions, ZmtpSocket } from "../../lib/kv/zmtp.ts";
import { within } from "../../support/wait.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A one-connection ZMTP peer driven by the test. */
class Peer {
  readonly listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  conn: Deno.Conn | null = null;
  reader: ByteReader | null = null;

  get endpoint(): string {
    return `tcp://127.0.0.1:${(this.listener.addr as Deno.NetAddr).port}`;
  }

  async accept(): Promise<void> {
    this.conn = await this.listener.accept();
    this.reader = new ByteReader(this.conn);
  }

  /** Accepts, greets with `greet`, reads the client's greeting and READY, answers READY as `type`. */
  async handshake(type = "PUB", greet = greeting()): Promise<Record<string, string>> {
    await this.accept();
    await this.write(greet);
    assert.ok(await within(this.reader!.take(64), "the client's greeting", 5000));
    const ready = await this.frame();
    await this.write(encodeReady({ "Socket-Type": type }));
    return parseReady(parseCommand(ready.body).data);
  }

  async write(bytes: Uint8Array): Promise<void> {
    let off = 0;
    while (off < bytes.length) off += await this.conn!.write(bytes.subarray(off));
  }

  /** The next frame the client sent (failing after 5 s instead of hanging the test). */
  frame(): Promise<{ flags: number; body: Uint8Array }> {
    const r = this.reader!;
    return within(
      (async () => {
        const flags = (await r.take(1))![0];
        const size = flags & FLAG_LONG
          ? Number(new DataView((await r.take(8))!.buffer).getBigUint64(0))
          : (await r.take(1))![0];
        return { flags, body: (await r.take(size))! };
      })(),
      "a frame from the client",
      5000,
    );
  }

  close(): void {
    try {
      this.conn?.close();
    } catch { /* closed */ }
    this.listener.close();
  }
}

/** Runs `fn` with a peer, a connected client and cleanup. */
async function withClient(
  type: "SUB" | "DEALER",
  fn: (peer: Peer, client: ZmtpSocket) => Promise<void>,
  opts: Partial<ZmtpOptions> = {},
  peerType = type === "SUB" ? "PUB" : "ROUTER",
): Promise<void> {
  const peer = new Peer();
  try {
    const [client] = await Promise.all([
      ZmtpSocket.connect(type, peer.endpoint, { clock: systemClock, ...opts }),
      peer.handshake(peerType),
    ]);
    try {
      await fn(peer, client);
    } finally {
      client.close();
    }
  } finally {
    peer.close();
  }
}

/** Connecting to a peer that answers `greet` (and READY as `type`) fails with `code` and `message`. */
async function refused(
  greet: Uint8Array,
  code: string,
  message: RegExp,
  type = "PUB",
  afterGreeting?: (peer: Peer) => Promise<void>,
): Promise<void> {
  const peer = new Peer();
  try {
    const script = (async () => {
      await peer.accept();
      await peer.write(greet);
      if (afterGreeting) await afterGreeting(peer);
      else {
        await peer.reader!.take(64);
        await peer.frame().catch(() => {});
        await peer.write(encodeReady({ "Socket-Type": type })).catch(() => {});
      }
    })();
    await assert.rejects(
      ZmtpSocket.connect("SUB", peer.endpoint, { clock: systemClock }),
      (e: Error & { code: string }) => {
        assert.equal(e.code, code, e.message);
        assert.match(e.message, message);
        return true;
      },
    );
    await script.catch(() => {});
  } finally {
    peer.close();
  }
}

Deno.test("zmtp: handshake with a PUB; the client's READY names its type", async () => {
  const peer = new Peer();
  try {
    const [client, props] = await Promise.all([
      ZmtpSocket.connect("SUB", peer.endpoint, { clock: systemClock }),
      peer.handshake("PUB"),
    ]);
    assert.deepEqual(props, { "Socket-Type": "SUB" });
    assert.equal(client.peerType, "PUB");
    assert.equal(client.peerVersion, "3.0");
    client.close();
  } finally {
    peer.close();
  }
});

Deno.test("zmtp: a peer that does not speak ZMTP 3 with NULL security is refused", async () => {
  const http = enc.encode("HTTP/1.1 400 Bad Request\r\n\r\n".padEnd(64, " "));
  await refused(http, "protocol", /not a ZMTP peer: greeting starts 485454/);
  const v2 = greeting();
  v2[10] = 2;
  await refused(v2, "protocol", /peer speaks ZMTP 2\.0; 3\.0 or later is needed/);
  const curve = greeting();
  curve.fill(0, 12, 32);
  curve.set(enc.encode("CURVE"), 12);
  await refused(curve, "protocol", /security mechanism "CURVE"/);
});

Deno.test("zmtp: a peer of the wrong type, or one that sends ERROR, is refused", async () => {
  await refused(greeting(), "protocol", /a SUB socket cannot talk to a "ROUTER" peer/, "ROUTER");
  await refused(
    greeting(),
    "peer_error",
    /peer refused the handshake: go away/,
    "PUB",
    async (p) => {
      await p.reader!.take(64);
      await p.frame();
      await p.write(encodeCommand("ERROR", new Uint8Array([7, ...enc.encode("go away")])));
    },
  );
});

Deno.test("zmtp: a peer silent past the handshake deadline fails with timeout", async () => {
  const clock = new FakeClock();
  const peer = new Peer();
  try {
    const connecting = ZmtpSocket.connect("SUB", peer.endpoint, {
      clock,
      handshakeTimeoutMs: 1000,
    });
    await peer.accept(); // and never greets
    assert.equal(clock.pending, 1);
    clock.advance(1000);
    await assert.rejects(connecting, /did not finish within 1000 ms/);
  } finally {
    peer.close();
  }
});

Deno.test("zmtp: short, long and empty frames of multipart messages arrive intact", async () => {
  await withClient("SUB", async (peer, client) => {
    const long = new Uint8Array(70_000).map((_, i) => i % 251);
    const receiving = client.receive();
    await peer.write(encodeMessage([enc.encode("kv"), new Uint8Array(8), long]));
    const [topic, seq, body] = (await within(receiving, "the message"))!;
    assert.equal(dec.decode(topic), "kv");
    assert.equal(seq.length, 8);
    assert.deepEqual(body, long);
    // A long frame may carry a short body; a message may end in an empty frame.
    const longHeader = new Uint8Array([FLAG_LONG | FLAG_MORE, 0, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]);
    await peer.write(new Uint8Array([...longHeader, ...encodeFrame(new Uint8Array(0), 0)]));
    assert.deepEqual(await within(client.receive(), "the second message"), [
      new Uint8Array([1, 2, 3]),
      new Uint8Array(0),
    ]);
  });
});

Deno.test("zmtp: an oversized frame is refused from its header, before its body", async () => {
  await withClient("SUB", async (peer, client) => {
    const receiving = client.receive();
    // Only the header of a 1 GB frame: refusing must not wait for the body.
    const header = new Uint8Array(9);
    header[0] = FLAG_LONG;
    new DataView(header.buffer).setBigUint64(1, 1_000_000_000n);
    await peer.write(header);
    await assert.rejects(within(receiving, "the refusal"), (e: Error & { code: string }) => {
      assert.equal(e.code, "too_large");
      assert.match(e.message, /frame of 1000000000 bytes exceeds the 4096-byte limit/);
      return true;
    });
    assert.ok(client.closed, "a stream cut mid-frame cannot be read on");
  }, { maxFrameBytes: 4096 });
});

Deno.test("zmtp: a message over its byte or frame limit is refused", async () => {
  await withClient("SUB", async (peer, client) => {
    const receiving = client.receive();
    const part = new Uint8Array(400);
    await peer.write(encodeMessage([part, part, part]));
    await assert.rejects(
      within(receiving, "the refusal"),
      /message exceeds the 1000-byte limit \(a frame of 400 bytes\)/,
    );
  }, { maxMessageBytes: 1000 });
  await withClient("SUB", async (peer, client) => {
    const receiving = client.receive();
    await peer.write(encodeMessage(Array.from({ length: 5 }, () => new Uint8Array(1))));
    await assert.rejects(receiving, /more than 4 frames/);
  }, { maxFrames: 4 });
});

Deno.test("zmtp: reserved flag bits and a command inside a message are protocol errors", async () => {
  await withClient("SUB", async (peer, client) => {
    const receiving = client.receive();
    await peer.write(new Uint8Array([0x10, 0]));
    await assert.rejects(receiving, /frame flags 0x10 set reserved bits/);
  });
  await withClient("SUB", async (peer, client) => {
    const receiving = client.receive();
    await peer.write(encodeFrame(new Uint8Array(1), FLAG_MORE));
    await peer.write(encodeCommand("PING", new Uint8Array(2)));
    await assert.rejects(receiving, /a command frame arrived inside a multipart message/);
  });
});

Deno.test("zmtp: PING is answered with PONG carrying its context; receive goes on", async () => {
  await withClient("SUB", async (peer, client) => {
    const receiving = client.receive();
    await peer.write(encodeCommand("PING", new Uint8Array([0, 10, ...enc.encode("ctx")])));
    const pong = await peer.frame();
    assert.equal(pong.flags, FLAG_COMMAND);
    const cmd = parseCommand(pong.body);
    assert.equal(cmd.name, "PONG");
    assert.equal(dec.decode(cmd.data), "ctx");
    await peer.write(encodeMessage([enc.encode("after")]));
    assert.equal(dec.decode((await within(receiving, "the message after the PING"))![0]), "after");
  });
});

Deno.test("zmtp: a SUB's subscription and a DEALER's message, as the peer reads them", async () => {
  await withClient("SUB", async (peer, client) => {
    await client.subscribe("kv-events");
    const f = await peer.frame();
    assert.equal(f.flags, 0);
    assert.deepEqual(f.body, new Uint8Array([1, ...enc.encode("kv-events")]));
    await client.ping();
    assert.equal(parseCommand((await peer.frame()).body).name, "PING");
  });
  await withClient("DEALER", async (peer, client) => {
    await client.send([new Uint8Array(0), new Uint8Array(300).fill(7)]);
    const a = await peer.frame();
    const b = await peer.frame();
    assert.deepEqual([a.flags, a.body.length], [FLAG_MORE, 0]);
    assert.deepEqual([b.flags, b.body.length], [FLAG_LONG, 300]);
    assert.throws(() => client.subscribe(""), /subscribe on a DEALER socket/);
  });
});

Deno.test("zmtp: close ends a pending receive with null at once; later sends reject", async () => {
  await withClient("DEALER", async (_peer, client) => {
    const receiving = client.receive();
    client.close();
    assert.equal(await within(receiving, "receive after close", 1000), null);
    await assert.rejects(client.send([new Uint8Array(1)]), /the DEALER socket is closed/);
    assert.equal(await client.receive(), null);
  });
});

Deno.test("zmtp: a peer closing the connection ends receive with null", async () => {
  await withClient("SUB", async (peer, client) => {
    const receiving = client.receive();
    peer.conn!.close();
    peer.conn = null;
    assert.equal(await within(receiving, "receive after the peer left", 1000), null);
  });
});

Deno.test("zmtp: a refused TCP connection fails with io, a bad endpoint with bad_endpoint", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  await assert.rejects(
    ZmtpSocket.connect("SUB", `tcp://127.0.0.1:${port}`, { clock: systemClock }),
    (
      e: Error & {
        code: string;
      },
    ) => e.code === "io" && e.message.startsWith(`connecting to tcp://127.0.0.1:${port}`),
  );
  await assert.rejects(
    ZmtpSocket.connect("SUB", "tcp://*:5557", { clock: systemClock }),
    /bind address/,
  );
});
