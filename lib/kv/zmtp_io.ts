/**
 * The reading and handshaking both ends of a ZMTP connection share, over a `ByteReader` on one
 * TCP connection: the greeting and READY exchange (either side may send first, as NULL security
 * allows), one frame with its size checked before its body is read, and one message with the
 * commands between messages handed to a callback. The client socket (`zmtp.ts`) and the server
 * side's accepted connections (`zmtp_peer.ts`) are built on these; neither end's state lives here.
 */

import type { ByteReader } from "./byte_reader.ts";
import {
  COMPATIBLE_PEERS,
  encodeReady,
  FLAG_LONG,
  greeting,
  GREETING_BYTES,
  parseCommand,
  parseErrorReason,
  parseFrameHeader,
  parseGreeting,
  parseReady,
  type SocketType,
  ZmtpError,
} from "./zmtp_codec.ts";

/** A multipart message: its frames in order. */
export type Message = Uint8Array[];

/** One frame as read. */
export interface Frame {
  /** More frames of the same message follow. */
  more: boolean;
  /** The frame is a command. */
  command: boolean;
  /** Its body. */
  body: Uint8Array;
}

/** What one connection accepts. */
export interface ReadLimits {
  /** Largest frame body, in bytes. */
  maxFrameBytes: number;
  /** Largest message (its frame bodies added up), in bytes. */
  maxMessageBytes: number;
  /** Most frames in one message. */
  maxFrames: number;
}

/** What the handshake learnt of the peer. */
export interface Handshake {
  /** Its socket type from READY, e.g. `SUB`. */
  peerType: string;
  /** All its READY properties (`Identity` among them, when sent). */
  peerProps: Record<string, string>;
  /** Its ZMTP version from the greeting, e.g. `3.1`. */
  version: string;
}

/**
 * Greeting and READY both ways as a socket of `type` (its READY carries `props` besides the
 * type); refuses a peer that is not ZMTP 3 with NULL security, one that sends ERROR, and one of
 * a type `type` cannot talk to.
 */
export async function handshake(
  conn: Deno.Conn,
  reader: ByteReader,
  type: SocketType,
  props: Record<string, string> = {},
): Promise<Handshake> {
  await writeAll(conn, greeting());
  const g = await reader.view(GREETING_BYTES);
  if (g === null) throw new ZmtpError("protocol", "peer closed the connection during the greeting");
  const { major, minor } = parseGreeting(g);
  reader.skip(GREETING_BYTES);
  await writeAll(conn, encodeReady({ "Socket-Type": type, ...props }));
  const frame = await readFrame(reader, 64 * 1024, 64 * 1024);
  if (frame === null) throw new ZmtpError("protocol", "peer closed the connection before READY");
  if (!frame.command) throw new ZmtpError("protocol", "peer sent a message before READY");
  const cmd = parseCommand(frame.body);
  if (cmd.name === "ERROR") {
    throw new ZmtpError("peer_error", `peer refused the handshake: ${parseErrorReason(cmd.data)}`);
  }
  if (cmd.name !== "READY") throw new ZmtpError("protocol", `expected READY, got ${cmd.name}`);
  const peerProps = parseReady(cmd.data);
  const peerType = peerProps["Socket-Type"] ?? "";
  if (!COMPATIBLE_PEERS[type].includes(peerType)) {
    throw new ZmtpError("protocol", `a ${type} socket cannot talk to a "${peerType}" peer`);
  }
  return { peerType, peerProps, version: `${major}.${minor}` };
}

/**
 * One frame, its size checked against `maxFrameBytes` and the message's remaining `budget`
 * before the body is read; null when the stream ends first.
 */
export async function readFrame(
  reader: ByteReader,
  maxFrameBytes: number,
  budget: number,
  maxMessageBytes = budget,
): Promise<Frame | null> {
  const first = await reader.view(1);
  if (first === null) return null;
  const head = await reader.view((first[0] & FLAG_LONG) !== 0 ? 9 : 2);
  if (head === null) return null;
  const h = parseFrameHeader(head, maxFrameBytes)!;
  if (h.size > budget) {
    throw new ZmtpError(
      "too_large",
      `message exceeds the ${maxMessageBytes}-byte limit (a frame of ${h.size} bytes)`,
    );
  }
  reader.skip(h.headerBytes);
  const body = await reader.take(h.size);
  return body === null ? null : { more: h.more, command: h.command, body };
}

/**
 * The next message within `limits`, or null when the stream ends. Each command met between
 * messages goes to `onCommand`, which may turn it into a message to return (a ZMTP 3.1
 * SUBSCRIBE, say) or answer null to read on.
 */
export async function readMessage(
  reader: ByteReader,
  limits: ReadLimits,
  onCommand: (body: Uint8Array) => Promise<Message | null>,
): Promise<Message | null> {
  const parts: Message = [];
  let total = 0;
  for (;;) {
    const frame = await readFrame(
      reader,
      limits.maxFrameBytes,
      limits.maxMessageBytes - total,
      limits.maxMessageBytes,
    );
    if (frame === null) return null;
    if (frame.command) {
      if (parts.length > 0) {
        throw new ZmtpError("protocol", "a command frame arrived inside a multipart message");
      }
      const surfaced = await onCommand(frame.body);
      if (surfaced) return surfaced;
      continue;
    }
    parts.push(frame.body);
    total += frame.body.length;
    if (parts.length > limits.maxFrames) {
      throw new ZmtpError("too_large", `message has more than ${limits.maxFrames} frames`);
    }
    if (!frame.more) return parts;
  }
}

/** Writes all of `data`. */
export async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

/** Closes `conn`, ignoring one already closed. */
export function closeQuietly(conn: Deno.Conn | null): void {
  try {
    conn?.close();
  } catch {
    // Already closed.
  }
}

/** Errors that mean the peer went away, like an orderly close. */
function isPeerGone(e: unknown): boolean {
  return e instanceof Deno.errors.ConnectionReset || e instanceof Deno.errors.BrokenPipe ||
    e instanceof Deno.errors.UnexpectedEof || e instanceof Deno.errors.ConnectionAborted;
}

/** An error's message, for logs and wrapped errors. */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** What `receiveOn` needs of a connection. */
export interface Receiver {
  readonly closed: boolean;
  readonly peerType: string;
  close(): void;
}

/**
 * `read`'s message for connection `c`: null once the peer ended it (then `c` is closed) or `c`
 * was closed meanwhile; any other failure closes `c` and rejects with a `ZmtpError`.
 */
export async function receiveOn(
  c: Receiver,
  read: () => Promise<Message | null>,
): Promise<Message | null> {
  try {
    const msg = await read();
    if (msg === null) c.close();
    return msg;
  } catch (e) {
    if (c.closed) return null;
    c.close();
    if (e instanceof ZmtpError) throw e;
    if (isPeerGone(e)) return null;
    throw new ZmtpError("io", `reading from the ${c.peerType} peer: ${errorText(e)}`, {
      cause: e,
    });
  }
}
