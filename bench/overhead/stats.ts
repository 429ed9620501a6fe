/** Rounding and medians for the overhead benchmark's figures. */

/** `n` rounded to `digits` decimals. */
export function round(n: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** `n` rounded to one decimal. */
export const round1 = (n: number) => round(n, 1);

/** Median of `xs` (mean of the middle two for an even count); NaN when empty. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
