/**
 * One request's state inside the simulated engine, from submission to its result. Private to
 * the engine; its own module only to keep `engine.ts` about scheduling.
 */

import type { GeneratedToken } from "./tokenizer.ts";
import type { GenerateResult } from "./types.ts";

/** Where a request is. */
export type Phase = "waiting" | "running" | "done";

/** A request being served; token counts are prompt positions unless said otherwise. */
export interface Sequence {
  /** Prompt token ids. */
  tokens: readonly number[];
  /** Rolling keys of the prompt's full blocks. */
  keys: number[];
  /** Leading blocks that may be served from cache: all but the one holding the last token. */
  matchable: number;
  /** Tokens to generate. */
  maxNew: number;
  /** The prompt's KV was transferred from a prefill worker: nothing to prefill. */
  transferred: boolean;
  /** The next generated token (seeded per request). */
  next: () => GeneratedToken;
  /** Receives each generated token. */
  onToken: (tokenId: number, index: number, piece: string) => void;
  /** Waiting, running or done. */
  phase: Phase;
  /** Simulated ms at submission. */
  submitAt: number;
  /** Simulated ms at admission; null while waiting. */
  admitAt: number | null;
  /** Simulated ms when the first token was emitted (or prefill ended, for zero tokens). */
  firstTokenAt: number | null;
  /** Prompt tokens served from cache at admission. */
  cached: number;
  /** Prompt tokens whose KV exists (cached plus prefilled). */
  computed: number;
  /** Leading blocks of `keys` this request pins. */
  pinned: number;
  /** KV tokens reserved in the pool beyond the pinned blocks. */
  reserved: number;
  /** Generated token ids. */
  out: number[];
  /** Settles the caller's promise. */
  resolve: (result: GenerateResult) => void;
  /** Removes the abort listener, if any. */
  unlisten?: () => void;
}
