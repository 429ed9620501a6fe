/**
 * Versions of replicated values: a Lamport clock and the id of the replica that wrote it. A
 * version is newer when its clock is higher, or on equal clocks when its replica id sorts
 * later, so every router orders any two writes the same way without looking at wall clocks.
 */

/** The version of one write. */
export interface Version {
  /** Lamport clock of the write. */
  clock: number;
  /** Replica that wrote it (unique per router process). */
  replica: string;
}

/** Negative when `a` is older than `b`, 0 when equal, positive when newer. */
export function compareVersions(a: Version, b: Version): number {
  if (a.clock !== b.clock) return a.clock - b.clock;
  return a.replica < b.replica ? -1 : a.replica > b.replica ? 1 : 0;
}

/** Whether `a` is strictly newer than `b` (anything is newer than nothing). */
export function isNewer(a: Version, b: Version | null | undefined): boolean {
  return !b || compareVersions(a, b) > 0;
}
