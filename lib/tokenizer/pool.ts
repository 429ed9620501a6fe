/**
 * Tokenizing off the event loop: `--tokenizer-threads` worker threads, each with its own copy of
 * the gateway's tokenizer (loaded from the same files), encode texts sent to them; the
 * event loop only posts the texts and reads the ids back. Encoding an 11k-token prompt takes
 * 20-35 ms of one core, during which an event loop that did it itself would serve nothing else.
 *
 * A request goes to the thread with the fewest characters pending. A thread that fails is
 * dropped. One that crashes, or cannot load its module or tokenizer, leaves what it had pending
 * to be encoded here, on the event loop, with the same result; one that leaves a request
 * unanswered past `answerTimeoutMs` is taken for hung by its input, and what it had pending
 * fails with a 503 `tokenizer_timeout` (the same input would hang the event loop). A dropped
 * thread that had answered before is replaced; one that never did is not (it would fail the
 * same way). With no thread left, everything is encoded here. With 0 threads everything is. `close()` terminates the threads.
 *
 * The threads run the program's entry (`setTokenizerThreadEntry`, called by `main.ts`, which
 * starts `thread.ts`'s loop in a thread named `TOKENIZER_THREAD`), so a bundled or compiled
 * program starts them from itself; without an entry, `thread_main.ts`.
 */

import {
  type EncodeAnswer,
  type EncodeRequest,
  type ThreadInit,
  TOKENIZER_THREAD,
} from "./thread.ts";
import type { Clock } from "../core/clock.ts";
import { GatewayError } from "../core/errors.ts";
import type { GatewayTokenizer } from "./tokenizer.ts";

let entry: string | null = null;

/** The program's entry module (`main.ts`'s `import.meta.url`), which tokenizer threads run. */
export function setTokenizerThreadEntry(url: string): void {
  entry = url;
}

interface Pending {
  parts: string[];
  addSpecial: boolean;
  resolve(ids: number[][]): void;
  reject(e: Error): void;
  /** Characters to encode (what a thread's backlog is weighed by). */
  chars: number;
  /** Cancels its watchdog. */
  stopWatch(): void;
}

interface Thread {
  worker: Worker;
  pending: Map<number, Pending>;
  /** Characters it has pending. */
  chars: number;
  /** It has answered a request (it started and worked: worth replacing if it fails). */
  answered: boolean;
}

/** Options of a pool. */
export interface PoolOptions {
  /** The module threads run (default: the program's entry, else `thread_main.ts`). */
  entry?: string;
  /** Told once per thread that fails, with why. */
  onThreadDown?: (reason: string) => void;
  /** Timers for the watchdog. */
  clock: Clock;
  /**
   * A thread that has not answered a request within this is taken for hung and dropped
   * (default 30 s: a 1 MB prompt encodes in about a second).
   */
  answerTimeoutMs?: number;
}

/** Encodes texts in worker threads; see the module comment. */
export class TokenizerPool {
  readonly #tok: GatewayTokenizer;
  readonly #threads: Thread[] = [];
  readonly #onDown: (reason: string) => void;
  readonly #clock: Clock;
  readonly #answerMs: number;
  readonly #url: string;
  #next = 0;
  #closed = false;

  /** Starts `threads` threads for `tok` (0: none, everything encoded on the event loop). */
  constructor(tok: GatewayTokenizer, threads: number, o: PoolOptions) {
    this.#tok = tok;
    this.#onDown = o.onThreadDown ?? (() => {});
    this.#clock = o.clock;
    this.#answerMs = o.answerTimeoutMs ?? 30_000;
    this.#url = o.entry ?? entry ?? new URL("./thread_main.ts", import.meta.url).href;
    for (let i = 0; i < threads; i++) this.#start();
  }

  /** Threads running. */
  get threads(): number {
    return this.#threads.length;
  }

  #start(): void {
    const worker = new Worker(this.#url, { type: "module", name: TOKENIZER_THREAD });
    const t: Thread = { worker, pending: new Map(), chars: 0, answered: false };
    worker.onmessage = (e: MessageEvent<EncodeAnswer>) => {
      const a = e.data;
      const p = t.pending.get(a.id);
      if (!p) return;
      t.pending.delete(a.id);
      t.chars -= p.chars;
      t.answered = true;
      p.stopWatch();
      if ("error" in a) p.reject(new Error(a.error));
      else p.resolve(a.ids.map((ids) => Array.from(ids)));
    };
    worker.onerror = (e) => {
      e.preventDefault();
      // What it had pending did not hang it: encoded here.
      for (const p of this.#drop(t, e.message)) this.#here(p);
    };
    worker.postMessage({ init: this.#tok.init } satisfies ThreadInit);
    this.#threads.push(t);
  }

  /**
   * Drops a failed thread, starting another in its place if it had worked (one that never
   * answered, whose module or tokenizer cannot load, is not started again); returns what it
   * had pending.
   */
  #drop(t: Thread, reason: string): Pending[] {
    const i = this.#threads.indexOf(t);
    if (i < 0) return [];
    this.#threads.splice(i, 1);
    t.worker.terminate();
    this.#onDown(reason);
    if (t.answered && !this.#closed) this.#start();
    const pending = [...t.pending.values()];
    t.pending.clear();
    return pending;
  }

  #here(p: Pending): void {
    p.stopWatch();
    try {
      p.resolve(p.parts.map((part) => this.#tok.encode(part, p.addSpecial)));
    } catch (e) {
      p.reject(e as Error);
    }
  }

  /** The ids of each of `parts`, each encoded on its own (as `GatewayTokenizer.encode`). */
  encodeMany(parts: string[], addSpecial: boolean): Promise<number[][]> {
    return new Promise((resolve, reject) => {
      const chars = parts.reduce((a, x) => a + x.length, 0);
      const p: Pending = { parts, addSpecial, resolve, reject, chars, stopWatch: () => {} };
      let t: Thread | null = null;
      for (const c of this.#threads) if (!t || c.chars < t.chars) t = c;
      if (!t) return this.#here(p);
      const id = this.#next++;
      const thread = t;
      thread.pending.set(id, p);
      thread.chars += chars;
      p.stopWatch = this.#clock.after(this.#answerMs, () => {
        // An input that hangs the tokenizer would hang this thread too: what the thread had
        // pending fails (503) rather than being encoded here.
        const why = `no answer within ${this.#answerMs} ms`;
        for (const q of this.#drop(thread, why)) {
          q.stopWatch();
          q.reject(
            new GatewayError(503, "tokenizer_timeout", `the tokenizer thread gave ${why}`, {
              retryAfter: 1,
            }),
          );
        }
      });
      thread.worker.postMessage({ id, parts, addSpecial } satisfies EncodeRequest);
    });
  }

  /** Terminates the threads; what they had pending is encoded here. */
  close(): void {
    this.#closed = true;
    for (const t of [...this.#threads]) {
      this.#threads.splice(this.#threads.indexOf(t), 1);
      t.worker.terminate();
      for (const p of t.pending.values()) this.#here(p);
    }
  }
}
