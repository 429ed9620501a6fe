/**
 * Learns over HTTP which models a worker serves: `GET /v1/models` (OpenAI list, as sglang and
 * vLLM serve it), else `GET /get_model_info` (sglang's `model_path`). Null when neither answers,
 * which leaves the worker serving any model. Also its KV cache capacity, where sglang states it
 * (`GET /get_server_info`, `max_total_num_tokens`; `capacityOf` reads it, gRPC's too).
 */

import { type FetchFn, getText, tryJson } from "./http.ts";

/** Model ids the worker at `url` serves, or null when it does not say. */
export async function discoverModels(
  fetchFn: FetchFn,
  url: string,
  timeoutMs: number,
  apiKey: string | null,
  signal?: AbortSignal,
): Promise<string[] | null> {
  const list = await getText(fetchFn, `${url}/v1/models`, timeoutMs, apiKey, signal);
  if (list.status === 200) {
    const body = tryJson(list.text) as { data?: unknown } | null;
    const data: unknown[] = Array.isArray(body?.data) ? body.data : [];
    const ids = data.map((m) => (m as { id?: unknown } | null)?.id)
      .filter((id): id is string => typeof id === "string");
    if (ids.length > 0) return [...new Set(ids)];
  }
  const info = await getText(fetchFn, `${url}/get_model_info`, timeoutMs, apiKey, signal);
  if (info.status === 200) {
    const body = tryJson(info.text) as { model_path?: unknown; served_model_name?: unknown } | null;
    const id = body?.served_model_name ?? body?.model_path;
    if (typeof id === "string" && id) return [id];
  }
  return null;
}

/** The KV cache capacity in tokens the worker at `url` states, or null when it does not. */
export async function discoverCapacity(
  fetchFn: FetchFn,
  url: string,
  timeoutMs: number,
  apiKey: string | null,
  signal?: AbortSignal,
): Promise<number | null> {
  const info = await getText(fetchFn, `${url}/get_server_info`, timeoutMs, apiKey, signal);
  return info.status === 200 ? capacityOf(tryJson(info.text)) : null;
}

/** The KV cache capacity in tokens a server-info body states, or null when it does not. */
export function capacityOf(info: unknown): number | null {
  const body = info as {
    max_total_num_tokens?: unknown;
    scheduler_info?: { max_total_num_tokens?: unknown } | null;
  } | null;
  const n = body?.max_total_num_tokens ?? body?.scheduler_info?.max_total_num_tokens;
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? n : null;
}
