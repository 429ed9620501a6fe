/**
 * Where a routing-benchmark target starts and what it fronts: the one type that the target
 * starters (`gateway.ts`, `peers.ts`, `front.ts`) take and `targets.ts`, which picks among them,
 * hands over. On its own so that the starters do not import `targets.ts` back.
 */

/** Where to start a target and what it fronts. */
export interface TargetContext {
  /** Its listen port on 127.0.0.1. */
  port: number;
  /** The fleet's base URLs. */
  workers: string[];
  /** Seed passed on (the gateway's `--random-seed`). */
  seed: number;
  /** Log and config file prefix for this measurement. */
  tag: string;
  /** Temp dir for logs and configs. */
  dir: string;
  /** Repository root (ends with `/`). */
  root: string;
  /** CPU to pin the target to. */
  cpu: number;
  /** gRPC and KV-event modes: the tokenizer our gateway loads (`--model-path`). */
  modelPath?: string;
  /** KV-event mode: each worker's labels (its ZeroMQ endpoints), registered with it. */
  labels?: Record<string, string>[];
  /** Our gateway's metrics port (default: a free one). */
  promPort?: number;
}
