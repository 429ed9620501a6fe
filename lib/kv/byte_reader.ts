/**
 * Exact-size reads over a byte stream (a TCP connection): `view(n)` for short headers, served
 * from one reused buffer, and `take(n)` for frame bodies, read straight into an array of their
 * own so a large body never grows the shared buffer. Both answer null at the end of the stream.
 */

/** Where bytes come from: `Deno.Conn`'s `read`. */
export interface ByteSource {
  /** Fills the start of `p`; resolves with the count, or null at the end of the stream. */
  read(p: Uint8Array): Promise<number | null>;
}

/** Size of the shared buffer: headers and the greeting always fit. */
const BUFFER_BYTES = 16 * 1024;

/** Exact-size reads from a `ByteSource`. */
export class ByteReader {
  readonly #source: ByteSource;
  #buf = new Uint8Array(BUFFER_BYTES);
  #start = 0;
  #end = 0;

  /** Reads from `source`. */
  constructor(source: ByteSource) {
    this.#source = source;
  }

  /**
   * The next `n` bytes (at most 16 KiB) without consuming them: a view valid until the next
   * call; null when the stream ends first.
   */
  async view(n: number): Promise<Uint8Array | null> {
    if (n > BUFFER_BYTES) throw new RangeError(`view of ${n} bytes exceeds ${BUFFER_BYTES}`);
    while (this.#end - this.#start < n) {
      if (this.#buf.length - this.#start < n) {
        this.#buf.copyWithin(0, this.#start, this.#end);
        this.#end -= this.#start;
        this.#start = 0;
      }
      const got = await this.#source.read(this.#buf.subarray(this.#end));
      if (got === null) return null;
      this.#end += got;
    }
    return this.#buf.subarray(this.#start, this.#start + n);
  }

  /** Consumes `n` bytes already seen through `view`. */
  skip(n: number): void {
    this.#start += n;
    if (this.#start === this.#end) this.#start = this.#end = 0;
  }

  /** The next `n` bytes in an array of their own; null when the stream ends first. */
  async take(n: number): Promise<Uint8Array | null> {
    const out = new Uint8Array(n);
    const buffered = Math.min(n, this.#end - this.#start);
    out.set(this.#buf.subarray(this.#start, this.#start + buffered));
    this.skip(buffered);
    let off = buffered;
    while (off < n) {
      const got = await this.#source.read(out.subarray(off));
      if (got === null) return null;
      off += got;
    }
    return out;
  }
}
