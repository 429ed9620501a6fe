/**
 * One streamed chat request of the chaos benchmark, as a client sees it: its status, the worker
 * the gateway routed it to (`x-smg-routed-worker-id`), the content text, the usage chunk, the
 * ids, whether it ended with `data: [DONE]`, any `event: error`, and the largest silence between
 * two events. The same function reads the reference answer straight from a worker. Times are
 * `performance.now()` less the run's start.
 */

/** The served model of `smg sim-worker` (its default `--model`). */
export const MODEL = "sim-model";

/** What a client saw of one stream. */
export interface StreamRecord {
  /** Its number in the run (also in its prompt: every prompt is distinct). */
  n: number;
  /** When it was sent and when its body ended, ms since the run's start. */
  startMs: number;
  endMs: number;
  /** The response status; 0 when no response came (`failure` says why). */
  status: number;
  /** `x-smg-routed-worker-id`: the worker that answered first. */
  worker: string | null;
  /** Its last event was `data: [DONE]`. */
  done: boolean;
  /** The payloads of its `event: error` events. */
  errorEvents: string[];
  /** The request or the body failed on the client (reset, timeout), or null. */
  failure: string | null;
  /** The concatenated content of choice 0. */
  text: string;
  /** Its usage chunk, or null. */
  usage: { prompt_tokens: number; completion_tokens: number } | null;
  /** Distinct `id`s among its events (one stream: 1). */
  ids: number;
  /** Events with data. */
  events: number;
  /** The largest time between two consecutive events, ms. */
  maxGapMs: number;
  /** When its first event came, ms since the run's start (NaN: none came). */
  firstEventMs: number;
}

/** The streamed chat request number `n`: a prompt of its own, greedy, `maxTokens` long. */
export function chatBody(n: number, maxTokens: number): Record<string, unknown> {
  return {
    model: MODEL,
    messages: [{ role: "user", content: `Stream ${n}: tell the story of the fox and the crow.` }],
    max_tokens: maxTokens,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  };
}

/** Reads one SSE event's `data` payload into `r` (and whether it is an `event: error`). */
function readEvent(event: string, r: StreamRecord, ids: Set<string>): void {
  let name = "message";
  let data: string | null = null;
  for (const line of event.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) {
      const v = line.slice(line[5] === " " ? 6 : 5);
      data = data === null ? v : `${data}\n${v}`;
    }
  }
  if (data === null) return;
  r.events++;
  if (name === "error") {
    r.errorEvents.push(data.slice(0, 300));
    return;
  }
  if (data.trim() === "[DONE]") {
    r.done = true;
    return;
  }
  r.done = false; // anything after a [DONE] undoes it
  const o = JSON.parse(data);
  if (typeof o.id === "string") ids.add(o.id);
  if (o.usage) r.usage = o.usage;
  for (const c of o.choices ?? []) {
    if (c.index === 0 && typeof c.delta?.content === "string") r.text += c.delta.content;
  }
}

/** Posts `body` to `url` (a chat completions URL) and reads the stream to its end. */
export async function streamOnce(
  url: string,
  body: Record<string, unknown>,
  n: number,
  t0: number,
  signal: AbortSignal,
): Promise<StreamRecord> {
  const r: StreamRecord = {
    n,
    startMs: performance.now() - t0,
    endMs: 0,
    status: 0,
    worker: null,
    done: false,
    errorEvents: [],
    failure: null,
    text: "",
    usage: null,
    ids: 0,
    events: 0,
    maxGapMs: 0,
    firstEventMs: NaN,
  };
  const ids = new Set<string>();
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
    r.status = res.status;
    r.worker = res.headers.get("x-smg-routed-worker-id");
    if (res.status !== 200 || !res.body) {
      r.failure = (await res.text()).slice(0, 300);
      return r;
    }
    let buf = "";
    let last: number | null = null;
    for await (const chunk of res.body.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      const events = buf.split(/\r\n\r\n|\n\n/);
      buf = events.pop() ?? "";
      if (events.length === 0) continue;
      const now = performance.now();
      if (last !== null) r.maxGapMs = Math.max(r.maxGapMs, now - last);
      else r.firstEventMs = now - t0;
      last = now;
      for (const e of events) readEvent(e, r, ids);
    }
    if (buf.trim() !== "") readEvent(buf, r, ids);
  } catch (e) {
    r.failure = (e as Error)?.message ?? String(e);
  } finally {
    r.endMs = performance.now() - t0;
    r.ids = ids.size;
  }
  return r;
}
