/**
 * KV-cache events from the engines: the event types, their decoder, the ZeroMQ stream, and the
 * publishing side (PUB and replay ROUTER) a simulated engine serves them with.
 */

export type {
  AllBlocksCleared,
  BlockHash,
  BlocksRemoved,
  BlocksStored,
  KvEvent,
  KvEventBatch,
  StoredBlock,
} from "./events.ts";
export { decodeEngineBatch, KvDecodeError } from "./engine_events.ts";
export type { KvEventSink, KvStreamStatus } from "./sink.ts";
export { dialZmtp, ZmqSubscriber, type ZmqSubscriberOptions } from "./zmq_subscriber.ts";
export type { Dial, KvSocket } from "./replay.ts";
export { ZmtpError, type ZmtpErrorCode, ZmtpSocket } from "./zmtp.ts";
export { ZmqPub } from "./zmq_pub.ts";
export { type ReplaySource, seqFrame, ZmqReplayServer } from "./zmq_replay_server.ts";
export type { ZmtpServerOptions } from "./zmtp_server.ts";
export { BlockIndex, type BlockIndexOptions, chainKey, type StoreRefusal } from "./block_index.ts";
export {
  type CursorSource,
  CursorSubscriber,
  type CursorSubscriberOptions,
} from "./cursor_subscriber.ts";
export {
  type KvIndexView,
  KvMonitor,
  type KvMonitorObserver,
  type KvMonitorOptions,
  type KvStream,
  type StartStream,
} from "./monitor.ts";
