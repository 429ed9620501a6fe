// A real ZeroMQ (libzmq through npm `zeromq`) KV-event publisher for tests, shaped like the
// engines' ZmqEventPublisher: PUB sends [topic, seq as 8-byte big-endian, payload]; a ROUTER
// answers a request [identity, "", start seq] with one [identity, "", seq, payload] per buffered
// batch from `start` on, then [identity, "", -1 as 8 bytes, ""]. Batches are encoded by the test.
//
// Usage: node zmq_publisher.mjs <zeromq dir> <pub port|0> <replay port|0> <topic> <buffer>
// Prints {"ready":true,"pub":P,"replay":R} once bound. Reads JSON lines on stdin:
//   {"op":"publish","payload":B64}  send with the next seq (and buffer it for replay)
//   {"op":"drop","payload":B64}     take the next seq and buffer it, but do not send it (a gap)
//   {"op":"reset"}                  start the seq over at 0 and empty the buffer (a restart)
//   {"op":"exit"}                   close the sockets and exit 0
// Answers each op with {"op":..., "seq":n}; prints {"replay":start} for each replay served.
import { createRequire } from "node:module";
import { createInterface } from "node:readline";

const [dir, pubPort, replayPort, topic, bufferSteps] = process.argv.slice(2);
const zmq = createRequire(`${dir}/`)("zeromq");

const pub = new zmq.Publisher({ sendHighWaterMark: 0, linger: 0 });
const router = new zmq.Router({ linger: 0 });
await pub.bind(`tcp://127.0.0.1:${pubPort}`);
await router.bind(`tcp://127.0.0.1:${replayPort}`);
const portOf = (s) => Number(s.lastEndpoint.split(":").pop());
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const topicBytes = Buffer.from(topic);
const seqBytes = (n) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(BigInt(n));
  return b;
};
let nextSeq = 0;
let buffer = [];
const remember = (seq, payload) => {
  buffer.push([seq, payload]);
  if (buffer.length > Number(bufferSteps)) buffer.shift();
};

// Replay service, as the engines do it: a request of any other shape is ignored.
const serveReplays = (async () => {
  for await (const frames of router) {
    if (frames.length !== 3) continue;
    const [id, , start] = frames;
    const from = Number(start.readBigUInt64BE());
    say({ replay: from });
    for (const [seq, payload] of buffer) {
      if (seq >= from) await router.send([id, Buffer.alloc(0), seqBytes(seq), payload]);
    }
    await router.send([id, Buffer.alloc(0), seqBytes(-1), Buffer.alloc(0)]);
  }
})().catch(() => {});

say({ ready: true, pub: portOf(pub), replay: portOf(router) });

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  if (cmd.op === "publish" || cmd.op === "drop") {
    const seq = nextSeq++;
    const payload = Buffer.from(cmd.payload, "base64");
    remember(seq, payload);
    if (cmd.op === "publish") await pub.send([topicBytes, seqBytes(seq), payload]);
    say({ op: cmd.op, seq });
  } else if (cmd.op === "reset") {
    nextSeq = 0;
    buffer = [];
    say({ op: "reset", seq: 0 });
  } else if (cmd.op === "exit") {
    break;
  }
}
pub.close();
router.close();
await serveReplays;
process.exit(0);
