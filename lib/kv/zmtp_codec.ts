/**
 * ZMTP 3.x wire format as pure functions over bytes: the 64-byte greeting, frame headers and
 * frames, the commands of NULL security (READY with its properties, PING, PONG, ERROR) and
 * subscriptions. No I/O: `zmtp_io.ts` reads and writes these over a TCP connection.
 *
 * Frames: one flags byte (bit 0 MORE, bit 1 LONG, bit 2 COMMAND, bits 3-7 zero), then the body
 * size in one byte (short) or eight big-endian bytes (long), then the body. A command body is a
 * one-byte name length, the name, and the command's data. We greet as ZMTP 3.0 (what libzmq peers
 * of every 3.x and 4.x release accept, subscriptions as data frames) and also answer 3.1's PING
 * and read 3.1's SUBSCRIBE and CANCEL commands.
 */

/** Frame flag: more frames of the same message follow. */
export const FLAG_MORE = 0x01;
/** Frame flag: the size is eight bytes. */
export const FLAG_LONG = 0x02;
/** Frame flag: the frame is a command. */
export const FLAG_COMMAND = 0x04;

/** Length of a ZMTP 3.x greeting. */
export const GREETING_BYTES = 64;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Why a ZMTP exchange failed; stable codes for callers that react differently to each. */
export type ZmtpErrorCode =
  | "protocol"
  | "too_large"
  | "timeout"
  | "closed"
  | "peer_error"
  | "io"
  | "bad_endpoint";

/** A ZMTP failure with a stable `code`; the message quotes the offending value. */
export class ZmtpError extends Error {
  /** What kind of failure. */
  readonly code: ZmtpErrorCode;

  /** Builds an error of kind `code`. */
  constructor(code: ZmtpErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ZmtpError";
    this.code = code;
  }
}

/** Our greeting: signature, version 3.0, mechanism NULL, as-server 0, zero filler. */
export function greeting(): Uint8Array {
  const g = new Uint8Array(GREETING_BYTES);
  g[0] = 0xff;
  g[9] = 0x7f;
  g[10] = 3;
  g[11] = 0;
  g.set(encoder.encode("NULL"), 12);
  return g;
}

/** What a peer's greeting says. */
export interface PeerGreeting {
  /** ZMTP major version (3 or more). */
  major: number;
  /** ZMTP minor version. */
  minor: number;
}

/** Checks a peer's 64-byte greeting: the ZMTP signature, version 3 or later, mechanism NULL. */
export function parseGreeting(g: Uint8Array): PeerGreeting {
  if (g.length !== GREETING_BYTES || g[0] !== 0xff || (g[9] & 0x01) !== 1) {
    throw new ZmtpError("protocol", `not a ZMTP peer: greeting starts ${hex(g.subarray(0, 10))}`);
  }
  const major = g[10];
  const minor = g[11];
  if (major < 3) {
    throw new ZmtpError("protocol", `peer speaks ZMTP ${major}.${minor}; 3.0 or later is needed`);
  }
  const mechanism = decoder.decode(g.subarray(12, 32)).replace(/\0+$/, "");
  if (mechanism !== "NULL") {
    throw new ZmtpError(
      "protocol",
      `peer wants security mechanism "${mechanism}"; only NULL is spoken`,
    );
  }
  return { major, minor };
}

/** A frame's header: its flags and body size. */
export interface FrameHeader {
  /** More frames of this message follow. */
  more: boolean;
  /** The frame is a command. */
  command: boolean;
  /** The header's length in bytes (2 or 9). */
  headerBytes: number;
  /** The body's length in bytes. */
  size: number;
}

/**
 * The header at the start of `bytes`, or null when more bytes are needed (`bytes` holds at least
 * the flags byte). Refuses reserved flag bits, a command with MORE, and a size past
 * `maxFrameBytes` before any of the body is read.
 */
export function parseFrameHeader(bytes: Uint8Array, maxFrameBytes: number): FrameHeader | null {
  const flags = bytes[0];
  if ((flags & 0xf8) !== 0) {
    throw new ZmtpError("protocol", `frame flags 0x${flags.toString(16)} set reserved bits`);
  }
  const command = (flags & FLAG_COMMAND) !== 0;
  const more = (flags & FLAG_MORE) !== 0;
  if (command && more) throw new ZmtpError("protocol", "a command frame has the MORE flag");
  const long = (flags & FLAG_LONG) !== 0;
  const headerBytes = long ? 9 : 2;
  if (bytes.length < headerBytes) return null;
  const size = long
    ? new DataView(bytes.buffer, bytes.byteOffset + 1, 8).getBigUint64(0)
    : BigInt(bytes[1]);
  if (size > BigInt(maxFrameBytes)) {
    throw new ZmtpError(
      "too_large",
      `frame of ${size} bytes exceeds the ${maxFrameBytes}-byte limit`,
    );
  }
  return { more, command, headerBytes, size: Number(size) };
}

/** One frame (header and body) for `body` with `flags` (LONG is set as the size needs). */
export function encodeFrame(body: Uint8Array, flags: number): Uint8Array {
  const long = body.length > 255;
  const head = long ? 9 : 2;
  const out = new Uint8Array(head + body.length);
  out[0] = flags | (long ? FLAG_LONG : 0);
  if (long) new DataView(out.buffer).setBigUint64(1, BigInt(body.length));
  else out[1] = body.length;
  out.set(body, head);
  return out;
}

/** The frames of a multipart message, MORE on all but the last, in one buffer. */
export function encodeMessage(parts: readonly Uint8Array[]): Uint8Array {
  const frames = parts.map((p, i) => encodeFrame(p, i < parts.length - 1 ? FLAG_MORE : 0));
  const out = new Uint8Array(frames.reduce((n, f) => n + f.length, 0));
  let off = 0;
  for (const f of frames) {
    out.set(f, off);
    off += f.length;
  }
  return out;
}

/** A command frame named `name` carrying `data`. */
export function encodeCommand(name: string, data: Uint8Array = new Uint8Array(0)): Uint8Array {
  const n = encoder.encode(name);
  const body = new Uint8Array(1 + n.length + data.length);
  body[0] = n.length;
  body.set(n, 1);
  body.set(data, 1 + n.length);
  return encodeFrame(body, FLAG_COMMAND);
}

/** A command's name and data. */
export interface Command {
  /** E.g. `READY`, `PING`. */
  name: string;
  /** The bytes after the name. */
  data: Uint8Array;
}

/** Splits a command frame's body into name and data. */
export function parseCommand(body: Uint8Array): Command {
  const len = body[0] ?? 0;
  if (body.length < 1 + len || len === 0) {
    throw new ZmtpError("protocol", `command body of ${body.length} bytes has no name`);
  }
  return { name: decoder.decode(body.subarray(1, 1 + len)), data: body.subarray(1 + len) };
}

/** READY's data: each property as a one-byte name length, name, 4-byte value length, value. */
export function encodeReady(props: Record<string, string>): Uint8Array {
  const parts: number[] = [];
  for (const [name, value] of Object.entries(props)) {
    const n = encoder.encode(name);
    const v = encoder.encode(value);
    parts.push(n.length, ...n, (v.length >>> 24) & 0xff, (v.length >>> 16) & 0xff);
    parts.push((v.length >>> 8) & 0xff, v.length & 0xff, ...v);
  }
  return encodeCommand("READY", new Uint8Array(parts));
}

/** READY's properties (names as sent; values decoded as UTF-8); refuses a truncated list. */
export function parseReady(data: Uint8Array): Record<string, string> {
  const props: Record<string, string> = {};
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let off = 0;
  while (off < data.length) {
    const nameLen = data[off++];
    if (off + nameLen + 4 > data.length) {
      throw new ZmtpError("protocol", "READY properties are truncated");
    }
    const name = decoder.decode(data.subarray(off, off + nameLen));
    off += nameLen;
    const valueLen = view.getUint32(off);
    off += 4;
    if (off + valueLen > data.length) {
      throw new ZmtpError("protocol", `READY property "${name}" runs past the command`);
    }
    props[name] = decoder.decode(data.subarray(off, off + valueLen));
    off += valueLen;
  }
  return props;
}

/** PONG's data for a PING's data: the PING's context (after its 2-byte TTL), at most 16 bytes. */
export function pongFor(pingData: Uint8Array): Uint8Array {
  return encodeCommand("PONG", pingData.subarray(2, 2 + 16));
}

/** A PING with a zero TTL (we ask nothing of the peer's timeouts) and `context`. */
export function encodePing(context: Uint8Array = new Uint8Array(0)): Uint8Array {
  const data = new Uint8Array(2 + context.length);
  data.set(context, 2);
  return encodeCommand("PING", data);
}

/** ERROR's reason (a one-byte length and the text). */
export function parseErrorReason(data: Uint8Array): string {
  const len = data[0] ?? 0;
  return decoder.decode(data.subarray(1, 1 + len));
}

/** The socket types spoken: SUB and DEALER connect, PUB and ROUTER accept. */
export type SocketType = "SUB" | "DEALER" | "PUB" | "ROUTER";

/** The peer types each socket type may talk to, for the peer-type check after READY. */
export const COMPATIBLE_PEERS: Readonly<Record<SocketType, readonly string[]>> = {
  SUB: ["PUB", "XPUB"],
  DEALER: ["ROUTER", "DEALER", "REP"],
  PUB: ["SUB", "XSUB"],
  ROUTER: ["DEALER", "REQ", "ROUTER"],
};

/**
 * A SUB's subscription to `prefix` in ZMTP 3.0 form: a data frame of 0x01 and the prefix (0x00
 * and the prefix cancels one, with `subscribe` false).
 */
export function encodeSubscribe(prefix: Uint8Array, subscribe = true): Uint8Array {
  const body = new Uint8Array(1 + prefix.length);
  body[0] = subscribe ? 1 : 0;
  body.set(prefix, 1);
  return encodeFrame(body, 0);
}

/** A subscription change a SUB sent: subscribe to, or cancel, a topic prefix. */
export interface SubscriptionChange {
  /** True for a subscription, false for a cancellation. */
  subscribe: boolean;
  /** The topic prefix. */
  prefix: Uint8Array;
}

/**
 * The subscription change in a SUB's one-frame message (ZMTP 3.0: first byte 1 subscribes, 0
 * cancels, the rest is the prefix), or null for any other message (a PUB ignores those).
 */
export function parseSubscription(parts: readonly Uint8Array[]): SubscriptionChange | null {
  if (parts.length !== 1 || parts[0].length === 0 || parts[0][0] > 1) return null;
  return { subscribe: parts[0][0] === 1, prefix: parts[0].subarray(1) };
}

/**
 * A ZMTP 3.1 SUBSCRIBE or CANCEL command in the 3.0 message form `parseSubscription` reads;
 * null for any other command.
 */
export function subscriptionMessage(cmd: Command): Uint8Array[] | null {
  if (cmd.name !== "SUBSCRIBE" && cmd.name !== "CANCEL") return null;
  const body = new Uint8Array(1 + cmd.data.length);
  body[0] = cmd.name === "SUBSCRIBE" ? 1 : 0;
  body.set(cmd.data, 1);
  return [body];
}

/** Bytes as hex, for error messages. */
export function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
