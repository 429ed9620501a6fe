/**
 * The chunked transfer coding of an HTTP/1.1 body, decoded over a byte buffer, for the worker
 * client's response bodies (`lib/upstream/http1_body.ts`) and the front's request bodies
 * (`lib/front/request.ts`). Strict: a chunk size that is not hex, chunk data longer than its
 * size, a missing CRLF after it or an overlong size or trailer line is an error, made by the
 * caller's `fail`. No I/O.
 */

const LF = 10;
const CR = 13;

const SIZE = 0;
const DATA = 1;
const DATA_END = 2;
const TRAILER = 3;
const DONE = 4;

/** Longest chunk-size or trailer line accepted. */
const MAX_LINE = 4096;

/**
 * A chunked-body decoder. `decode` consumes what it can of `buf[from, to)`, pushes the payload
 * ranges it found onto `out` (start, end pairs), and returns where it stopped; a line cut off by
 * the end of the buffer is left for the next call.
 */
export class ChunkedDecoder {
  #state = SIZE;
  #remaining = 0;
  readonly #fail: (msg: string) => Error;

  /** A decoder whose malformed input throws `fail(what is wrong)`. */
  constructor(fail: (msg: string) => Error) {
    this.#fail = fail;
  }

  /** Whether the last chunk and the trailers have been read. */
  get done(): boolean {
    return this.#state === DONE;
  }

  /** Decodes `buf[from, to)`; see the class comment. */
  decode(buf: Uint8Array, from: number, to: number, out: number[]): number {
    let p = from;
    while (p < to && this.#state !== DONE) {
      switch (this.#state) {
        case DATA: {
          const n = Math.min(this.#remaining, to - p);
          out.push(p, p + n);
          p += n;
          this.#remaining -= n;
          if (this.#remaining === 0) this.#state = DATA_END;
          break;
        }
        case DATA_END: {
          if (buf[p] === LF) p += 1;
          else if (buf[p] === CR) {
            if (p + 1 >= to) return p;
            if (buf[p + 1] !== LF) throw this.#fail("chunk data not followed by CRLF");
            p += 2;
          } else throw this.#fail("chunk data longer than its size");
          this.#state = SIZE;
          break;
        }
        case SIZE: {
          const eol = lineEnd(buf, p, to, this.#fail);
          if (eol < 0) return p;
          let size = 0;
          let digits = 0;
          let i = p;
          for (; i < eol; i++) {
            const c = buf[i];
            const v = c >= 48 && c <= 57
              ? c - 48
              : c >= 97 && c <= 102
              ? c - 87
              : c >= 65 && c <= 70
              ? c - 55
              : -1;
            if (v < 0) break;
            size = size * 16 + v;
            digits++;
          }
          // hex digits, optional spaces, then `;` extensions or the line end.
          while (i < eol && (buf[i] === 32 || buf[i] === 9)) i++;
          const next = buf[i];
          if (
            digits === 0 || digits > 13 ||
            (i < eol && next !== 59 && !(next === CR && i === eol - 1))
          ) {
            throw this.#fail("bad chunk size");
          }
          p = eol + 1;
          if (size === 0) this.#state = TRAILER;
          else {
            this.#remaining = size;
            this.#state = DATA;
          }
          break;
        }
        case TRAILER: {
          const eol = lineEnd(buf, p, to, this.#fail);
          if (eol < 0) return p;
          const blank = eol === p || (eol === p + 1 && buf[p] === CR);
          p = eol + 1;
          if (blank) this.#state = DONE;
          break;
        }
      }
    }
    return p;
  }
}

/** Index of the LF ending the line that starts at `p`, or -1 when it is not all in the buffer. */
function lineEnd(buf: Uint8Array, p: number, to: number, fail: (msg: string) => Error): number {
  const eol = buf.indexOf(LF, p);
  if (eol >= 0 && eol < to) return eol;
  if (to - p > MAX_LINE) throw fail("a chunk-size or trailer line is too long");
  return -1;
}
