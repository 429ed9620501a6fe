// A real ZeroMQ (libzmq through npm `zeromq`) SUB and replay DEALER for tests of our PUB and
// replay ROUTER, shaped like the gateways that read the engines' KV events.
//
// Usage: node zmq_subscriber.mjs <zeromq dir> <pub endpoint> <topic> <replay endpoint>
// Connects a SUB subscribed to <topic>, prints {"ready":true}, then one line per message:
//   {"topic":T, "seq":n, "payload":B64}
// Reads JSON lines on stdin:
//   {"op":"replay","from":n}  asks the replay ROUTER from n (a DEALER sends ["", n as 8 bytes])
//                             and prints {"replayed":[[seq, B64], ...]} once -1 arrives
//   {"op":"exit"}             closes the sockets and exits 0
import { createRequire } from "node:module";
import { createInterface } from "node:readline";

const [dir, pubEndpoint, topic, replayEndpoint] = process.argv.slice(2);
const zmq = createRequire(`${dir}/`)("zeromq");
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

const sub = new zmq.Subscriber({ linger: 0 });
sub.connect(pubEndpoint);
sub.subscribe(topic);
say({ ready: true });

const reading = (async () => {
  for await (const [t, seq, payload] of sub) {
    say({
      topic: t.toString(),
      seq: Number(seq.readBigInt64BE()),
      payload: payload.toString("base64"),
    });
  }
})().catch(() => {});

async function replay(from) {
  const dealer = new zmq.Dealer({ linger: 0 });
  dealer.connect(replayEndpoint);
  const start = Buffer.alloc(8);
  start.writeBigUInt64BE(BigInt(from));
  await dealer.send([Buffer.alloc(0), start]);
  const got = [];
  for await (const [, seq, payload] of dealer) {
    const n = Number(seq.readBigInt64BE());
    if (n === -1) break;
    got.push([n, payload.toString("base64")]);
  }
  dealer.close();
  say({ replayed: got });
}

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  if (cmd.op === "replay") await replay(cmd.from);
  else if (cmd.op === "exit") break;
}
sub.close();
await reading;
process.exit(0);
