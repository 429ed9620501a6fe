/**
 * The tokenizer thread's side of `TokenizerPool` (`pool.ts`): it builds the gateway's tokenizer
 * from the `TokenizerInit` it is sent first (loading it again from its path, or from the parts
 * of one built in memory), then answers each request (texts to encode) with
 * their ids, as `Uint32Array`s whose buffers are transferred back, or with the error's message.
 * Started by the program's entry (`main.ts`) when the thread is named `TOKENIZER_THREAD`, or by
 * `thread_main.ts` where there is no such entry (tests, benchmarks).
 */

import type { GatewayTokenizer, TokenizerInit } from "./tokenizer.ts";

/** The name a tokenizer thread is started with (the program's entry dispatches on it). */
export const TOKENIZER_THREAD = "smg-tokenizer";

/** The first message: what to build the tokenizer from. */
export interface ThreadInit {
  init: TokenizerInit;
}

/** A request: `parts` each encoded on its own. */
export interface EncodeRequest {
  id: number;
  parts: string[];
  addSpecial: boolean;
}

/** The answer to request `id`. */
export type EncodeAnswer = { id: number; ids: Uint32Array[] } | { id: number; error: string };

/** Whether this thread was started as a tokenizer thread. */
export function isTokenizerThread(): boolean {
  return "WorkerGlobalScope" in globalThis &&
    (globalThis as unknown as { name?: string }).name === TOKENIZER_THREAD;
}

/**
 * Serves encode requests in this (worker) thread until it is terminated, in the order they
 * come. The tokenizer's modules are imported here, not by this module's importers: a gateway
 * with no tokenizer does not load them.
 */
export function tokenizerThread(): void {
  const scope = globalThis as unknown as {
    onmessage: ((e: MessageEvent<ThreadInit | EncodeRequest>) => void) | null;
    postMessage(m: EncodeAnswer, transfer?: Transferable[]): void;
  };
  let tok: Promise<GatewayTokenizer> | null = null;
  let turn: Promise<unknown> = Promise.resolve();
  scope.onmessage = (e) => {
    const m = e.data;
    if ("init" in m) {
      const i = m.init;
      // A tokenizer that cannot be built fails the thread (the pool then encodes itself).
      tok = import("./tokenizer.ts").then((t) =>
        "path" in i
          ? t.loadTokenizer(i.path)
          : new t.GatewayTokenizer(i.json, i.config, i.source, i.template)
      );
      tok.catch((err) =>
        queueMicrotask(() => {
          throw err;
        })
      );
      return;
    }
    turn = turn.then(async () => {
      // Outside the try: a tokenizer that could not be built fails the thread, not the request
      // (the pool encodes what the thread had pending itself).
      const t = await tok!;
      try {
        const ids = m.parts.map((p) => Uint32Array.from(t.encode(p, m.addSpecial)));
        scope.postMessage({ id: m.id, ids }, ids.map((a) => a.buffer));
      } catch (err) {
        scope.postMessage({ id: m.id, error: (err as Error)?.message ?? String(err) });
      }
    });
  };
}
