/**
 * The fault benches' numeric flags (`run.ts`, `chaos_streams.ts`): a flag's text as a number at
 * least `min`, or an error naming the flag.
 */

/** `raw` (the value of `--name`) as a number >= `min`; throws naming the flag otherwise. */
export function numberFlag(name: string, raw: string, min: number): number {
  const x = Number(raw);
  if (!Number.isFinite(x) || x < min) throw new Error(`--${name}: a number >= ${min}, got ${raw}`);
  return x;
}
