/**
 * Fuzz family `json`: JSON bodies on every inference route (`ENDPOINT_PATHS`), each a valid
 * body bent by structural mutations (`json_mutate.ts`: wrong types, missing and extra fields,
 * nesting, unicode, huge numbers, broken text), with the routing headers bent too, sent over
 * HTTP to a gateway in front of a recording worker. The run's seed picks the policy (`POLICIES`),
 * with sticky sessions on, so bent bodies also reach the policies that read their text and keys.
 *
 * Oracles: an answer within `ANSWER_MS`; never 5xx (the worker is never at fault); a 4xx carries
 * SMG's error envelope (`{"error": {"message": ...}}`); a 2xx was forwarded, and the worker got
 * the client's bytes unchanged.
 */

import type { PolicyName } from "../../lib/config/config.ts";
import type { Random } from "../../lib/core/clock.ts";
import { ENDPOINT_PATHS } from "../../lib/core/types.ts";
import { startGateway } from "../gateway.ts";
import type { FuzzFamily, FuzzTarget, Outcome } from "./driver.ts";
import { type Json, mutateValue, serialise } from "./json_mutate.ts";
import { chance, int, pick, randomText, weighted } from "./mutate.ts";
import { RecordingWorker } from "./recording_worker.ts";

/** Longest a request may take to be answered, stream included. */
const ANSWER_MS = 10_000;
const MODEL = "fuzz-model";

/** The policies a run may route with, one per seed (`seed % length`). */
export const POLICIES: readonly PolicyName[] = [
  "cache_aware",
  "manual",
  "consistent_hashing",
  "prefix_hash",
  "round_robin",
  "power_of_two",
  "least_load",
  "random",
];

/** A valid body for `path`, marked with `tag`. */
function baseBody(r: Random, path: string, tag: string): { [k: string]: Json } {
  const stream = chance(r, 0.2);
  switch (path) {
    case "/v1/chat/completions":
      return {
        model: MODEL,
        messages: chance(r, 0.5) ? [{ role: "user", content: tag }] : [
          { role: "system", content: "be brief" },
          {
            role: "user",
            content: [{ type: "text", text: tag }, { type: "image_url", image_url: { url: "x" } }],
          },
        ],
        max_tokens: 4,
        stream,
      };
    case "/v1/completions":
      return {
        model: MODEL,
        prompt: pick(r, [tag, [tag, "b"], [1, 2, 3]] as Json[]),
        max_tokens: 4,
        stream,
      };
    case "/generate":
      return chance(r, 0.7)
        ? { text: tag, sampling_params: { max_new_tokens: 1 }, stream }
        : { input_ids: [1, 2, 3], rid: tag, stream };
    case "/v1/embeddings":
      return { model: MODEL, input: chance(r, 0.7) ? tag : [tag, "b"] };
    default:
      return { model: MODEL, query: tag, documents: ["a", "b"] };
  }
}

/** Headers of one request: its id, and bent content types and routing headers. */
function headers(r: Random, id: string): Record<string, string> {
  const h: Record<string, string> = { "x-request-id": id };
  const type = weighted(r, [[8, "application/json"], [1, "text/plain"], [1, ""]] as const);
  if (type) h["content-type"] = type;
  if (chance(r, 0.2)) {
    h["x-smg-routing-tokens"] = pick(r, [
      "1,2,3",
      "",
      ",",
      "-1",
      "4294967296",
      "1,,2",
      "a",
      "1".repeat(5000),
    ]);
  }
  if (chance(r, 0.3)) {
    h["x-smg-routing-key"] = chance(r, 0.5)
      ? `k${int(r, 0, 20)}`
      : randomText(r, 10).replace(/[^\x20-\x7e]/g, "");
  }
  return h;
}

/** The JSON fuzzer's target: the gateway's URL and how to stop it and its worker. */
export class JsonTarget implements FuzzTarget {
  readonly #url: string;
  readonly #close: () => Promise<void>;
  /** Bodies the worker got, by `x-request-id`. */
  readonly #got = new Map<string, string[]>();

  /** A target at `url`; `received` must hear every request its worker gets. */
  constructor(url: string, close: () => Promise<void>) {
    this.#url = url;
    this.#close = close;
  }

  received(requestId: string, body: string): void {
    const list = this.#got.get(requestId) ?? [];
    list.push(body);
    this.#got.set(requestId, list);
  }

  async run(index: number, r: Random): Promise<Outcome> {
    const path = pick(r, Object.values(ENDPOINT_PATHS));
    const id = `fj${index}`;
    let body: Json = baseBody(r, path, `tag-${index}`);
    const muts = weighted(r, [[2, 0], [5, 1], [3, 2], [1, 4]] as const);
    for (let i = 0; i < muts; i++) body = mutateValue(r, body);
    const { bytes, bent } = serialise(r, body);
    const input = `${path} ${bent ?? ""} ${new TextDecoder().decode(bytes.subarray(0, 160))}`;
    const violations: string[] = [];
    let res: Response;
    try {
      res = await fetch(`${this.#url}${path}`, {
        method: "POST",
        headers: headers(r, id),
        body: bytes as Uint8Array<ArrayBuffer>,
        signal: AbortSignal.timeout(ANSWER_MS),
      });
    } catch (e) {
      return { labels: ["no-answer"], violations: [`no answer: ${(e as Error).message}`], input };
    }
    let text = "";
    try {
      text = await res.text();
    } catch (e) {
      violations.push(`the body broke off: ${(e as Error).message}`);
    }
    const s = res.status;
    if (s >= 500) violations.push(`answered ${s}: ${text.slice(0, 200)}`);
    else if (s >= 400 && !isEnvelope(text)) {
      violations.push(`${s} without an error envelope: ${text.slice(0, 200)}`);
    } else if (s < 300) {
      const got = this.#got.get(id) ?? [];
      const sent = new TextDecoder().decode(bytes);
      if (!got.includes(sent)) {
        violations.push(
          `answered ${s} but the worker got ${got.length ? "another body" : "nothing"}`,
        );
      }
    }
    this.#got.delete(id);
    return { labels: [String(s)], violations, input };
  }

  async finish(): Promise<string[]> {
    const res = await fetch(`${this.#url}/health`);
    await res.body?.cancel();
    return res.status === 200 ? [] : [`/health answered ${res.status} after the run`];
  }

  close(): Promise<void> {
    return this.#close();
  }
}

function isEnvelope(text: string): boolean {
  try {
    const e = JSON.parse(text)?.error;
    return typeof e?.message === "string" && typeof e?.code === "string";
  } catch {
    return false;
  }
}

/** The inference-body family. */
export const jsonBodies: FuzzFamily = {
  name: "json",
  concurrency: 16,
  async start(seed) {
    let target: JsonTarget | null = null;
    // Two workers: every policy has a choice to make (power_of_two refuses fewer).
    const workers = [0, 1].map(() =>
      new RecordingWorker((q) => target?.received(q.requestId, q.body), MODEL)
    );
    const closeWorkers = () => Promise.all(workers.map((w) => w.close()));
    const gw = await startGateway(workers.map((w) => w.url), {
      policy: POLICIES[seed % POLICIES.length],
      routingKeyOverride: true,
      maxPayloadSize: 128 * 1024,
      randomSeed: seed,
    }).catch(async (e) => {
      await closeWorkers();
      throw e;
    });
    target = new JsonTarget(gw.url, async () => {
      await gw.close();
      await closeWorkers();
    });
    return target;
  },
};
