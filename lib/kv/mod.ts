/** KV-cache events from the engines: the event types, their decoder, and the ZMTP client. */

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
export {
  type Message,
  type SocketType,
  ZmtpError,
  type ZmtpErrorCode,
  type ZmtpOptions,
  ZmtpSocket,
} from "./zmtp.ts";
