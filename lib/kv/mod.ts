/** KV-cache events from the engines: the ZMTP client that reads them. */

export {
  type Message,
  type SocketType,
  ZmtpError,
  type ZmtpErrorCode,
  type ZmtpOptions,
  ZmtpSocket,
} from "./zmtp.ts";
