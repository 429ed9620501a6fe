/**
 * The read buffer of an HTTP/1.1 connection, shared by the worker client (`lib/upstream/`) and
 * the front (`lib/front/`): `buf[start, end)` holds the bytes not consumed yet; `readSpace`
 * says where the next read goes, making room by moving the live bytes or growing the buffer
 * (a sized body's length at once), and gives a large empty buffer back. No I/O.
 */

/** A read buffer: `buf[start, end)` holds the bytes not consumed yet. */
export interface ReadBuffer {
  buf: Uint8Array;
  start: number;
  end: number;
  /** Bytes the reader waits to have from `start` (a sized body): the buffer grows to fit at once. */
  want?: number;
}

/** Size of a fresh read buffer; an empty one larger than this is given back. */
export const READ_BUFFER = 16 * 1024;

/**
 * Where the next read goes (no read may be pending): after `end`, the buffer rewound when empty
 * (and shrunk back after a large body), given room when full.
 */
export function readSpace(b: ReadBuffer): Uint8Array {
  if (b.start === b.end) {
    b.start = b.end = 0;
    if (b.buf.length > READ_BUFFER && (b.want ?? 0) <= READ_BUFFER) {
      b.buf = new Uint8Array(READ_BUFFER);
    }
  } else if (b.end === b.buf.length) makeRoom(b);
  return b.buf.subarray(b.end);
}

/** Makes room after `end`: the live bytes move to the front, or into a bigger buffer. */
function makeRoom(b: ReadBuffer): void {
  const used = b.end - b.start;
  const want = Math.max(b.want ?? 0, used + 1);
  if (b.start > 0 && used < b.buf.length / 2 && want <= b.buf.length) {
    b.buf.copyWithin(0, b.start, b.end);
  } else {
    const bigger = new Uint8Array(Math.max(b.buf.length * 2, want));
    bigger.set(b.buf.subarray(b.start, b.end));
    b.buf = bigger;
  }
  b.start = 0;
  b.end = used;
}
