/**
 * Which requests are traced: OpenTelemetry's samplers by their `OTEL_TRACES_SAMPLER` names.
 * `always_on`, `always_off`, `traceidratio` (a share of traces, decided on the trace id alone so
 * every service that sees the id decides alike), and the `parentbased_` forms of the three, which
 * follow a client's sampled flag when its `traceparent` came and decide as their root sampler
 * otherwise. The ratio compares the trace id's low 56 bits (its random part, as OpenTelemetry's
 * consistent probability sampling reads it) with `ratio × 2^56`.
 */

/** The sampler names `OTEL_TRACES_SAMPLER` takes. */
export const SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;

/** One of `SAMPLERS`. */
export type SamplerName = typeof SAMPLERS[number];

/** A sampler: whether a trace is recorded, from its id and the client's flag (null: no parent). */
export type Sampler = (traceId: string, parentSampled: boolean | null) => boolean;

const TWO_56 = 2 ** 56;

/** Whether `traceId`'s low 56 bits fall under `ratio` of their range. */
export function underRatio(traceId: string, ratio: number): boolean {
  if (ratio >= 1) return true;
  if (ratio <= 0) return false;
  // The last 14 hex digits, 56 bits: exact to 2^-53 of the range, enough to compare.
  let v = 0;
  for (let i = 18; i < 32; i++) {
    const c = traceId.charCodeAt(i);
    v = v * 16 + (c <= 57 ? c - 48 : c - 87);
  }
  return v < ratio * TWO_56;
}

/** The sampler `name` with `ratio` (used by the ratio samplers only). */
export function sampler(name: SamplerName, ratio: number): Sampler {
  const root = name.endsWith("always_on")
    ? () => true
    : name.endsWith("always_off")
    ? () => false
    : (id: string) => underRatio(id, ratio);
  if (!name.startsWith("parentbased_")) return (id) => root(id);
  return (id, parent) => parent ?? root(id);
}
