/**
 * Streaming output: token ids arrive a few at a time and leave as text.
 *
 * `IncrementalDecoder` turns ids into text as soon as it is final: it decodes a window that
 * starts a few tokens back (so tokenizers whose decoding depends on the previous token, such as a
 * leading-space marker, decode the same as the whole text would) and holds back text that ends
 * in an incomplete UTF-8 sequence (U+FFFD: a character split across tokens) until the next token
 * completes it. `StopMatcher` finds stop strings in that text even when one is split across
 * chunks, holding back only a tail that could still begin one.
 */

/** What decoding needs of a tokenizer. */
export interface Decoder {
  decode(ids: readonly number[], skipSpecial: boolean): string;
}

const REPLACEMENT = "\uFFFD";

/** Ids in, final text out; see the module comment. */
export class IncrementalDecoder {
  readonly #dec: Decoder;
  readonly #skipSpecial: boolean;
  readonly #ids: number[] = [];
  /** Start of the decode window. */
  #prefix = 0;
  /** Ids whose text has been given out. */
  #read = 0;

  constructor(decoder: Decoder, skipSpecial = true) {
    this.#dec = decoder;
    this.#skipSpecial = skipSpecial;
  }

  /** All ids pushed so far. */
  get ids(): readonly number[] {
    return this.#ids;
  }

  /** Adds `ids`; returns the text they complete (maybe ""). */
  push(ids: readonly number[]): string {
    for (const id of ids) this.#ids.push(id);
    const done = this.#dec.decode(this.#ids.slice(this.#prefix, this.#read), this.#skipSpecial);
    const all = this.#dec.decode(this.#ids.slice(this.#prefix), this.#skipSpecial);
    if (all.length <= done.length || all.endsWith(REPLACEMENT)) return "";
    this.#prefix = this.#read;
    this.#read = this.#ids.length;
    return all.slice(done.length);
  }

  /** The text still held back (the stream ended): an incomplete character stays U+FFFD. */
  flush(): string {
    const done = this.#dec.decode(this.#ids.slice(this.#prefix, this.#read), this.#skipSpecial);
    const all = this.#dec.decode(this.#ids.slice(this.#prefix), this.#skipSpecial);
    this.#prefix = this.#read = this.#ids.length;
    return all.length > done.length ? all.slice(done.length) : "";
  }
}

/** What `StopMatcher.push` gives out. */
export interface StopStep {
  /** Text to send now. */
  text: string;
  /** The stop string found (generation is over), or null. */
  stopped: string | null;
}

/** Finds stop strings across chunk boundaries; see the module comment. */
export class StopMatcher {
  readonly #stops: readonly string[];
  readonly #keep: boolean;
  readonly #longest: number;
  #held = "";
  #done = false;

  /** `includeStop` keeps the stop string in the output (sglang's `no_stop_trim`). */
  constructor(stops: readonly string[], includeStop = false) {
    this.#stops = stops.filter((s) => s.length > 0);
    this.#keep = includeStop;
    this.#longest = Math.max(0, ...this.#stops.map((s) => s.length));
  }

  /** Whether a stop string was found. */
  get stopped(): boolean {
    return this.#done;
  }

  /** Feeds `text`; what may be sent, and whether a stop string ended it. */
  push(text: string): StopStep {
    if (this.#done) return { text: "", stopped: null };
    if (this.#stops.length === 0) return { text, stopped: null };
    const buf = this.#held + text;
    let at = -1;
    let which = "";
    for (const s of this.#stops) {
      const i = buf.indexOf(s);
      if (i >= 0 && (at < 0 || i < at)) {
        at = i;
        which = s;
      }
    }
    if (at >= 0) {
      this.#done = true;
      this.#held = "";
      return { text: buf.slice(0, this.#keep ? at + which.length : at), stopped: which };
    }
    const hold = this.#tail(buf);
    this.#held = buf.slice(buf.length - hold);
    return { text: buf.slice(0, buf.length - hold), stopped: null };
  }

  /** The held-back tail (the stream ended without a stop string). */
  flush(): string {
    const t = this.#held;
    this.#held = "";
    return this.#done ? "" : t;
  }

  /** Length of the longest suffix of `buf` that begins some stop string. */
  #tail(buf: string): number {
    for (let n = Math.min(this.#longest - 1, buf.length); n > 0; n--) {
      const suffix = buf.slice(buf.length - n);
      if (this.#stops.some((s) => s.startsWith(suffix))) return n;
    }
    return 0;
  }
}
