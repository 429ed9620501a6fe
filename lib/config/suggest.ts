/**
 * The flag name closest to a misspelt one (Levenshtein distance), for "did you mean" hints on
 * unknown flags and unknown config-file keys.
 */

/** Edit distance between `a` and `b` (insertions, deletions, substitutions). */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const same = a.charCodeAt(i - 1) === b.charCodeAt(j - 1);
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/**
 * The candidate closest to `name` (compared lower-case, `_` read as `-`, leading dashes
 * dropped), or null when even the closest differs in more than a third of its characters.
 */
export function closest(name: string, candidates: readonly string[]): string | null {
  const n = name.toLowerCase().replace(/_/g, "-").replace(/^-+/, "");
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(n, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best !== null && bestDistance <= Math.max(2, Math.floor(best.length / 3)) ? best : null;
}
