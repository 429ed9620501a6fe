/** KV-cache events from the engines: the event types, their decoder, and the ZeroMQ stream. */

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
