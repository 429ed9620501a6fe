/**
 * A binary min-heap ordered by a caller's `less`: the cache-aware trees' LRU eviction (smallest
 * stamp first) and the fake and virtual clocks' timers (earliest first). Push and pop are
 * O(log n); peek is O(1).
 */

/** A binary min-heap. */
export class MinHeap<T> {
  readonly #items: T[] = [];
  readonly #less: (a: T, b: T) => boolean;

  /** A heap whose top is the item no other item is `less` than. */
  constructor(less: (a: T, b: T) => boolean) {
    this.#less = less;
  }

  /** Number of items held. */
  get size(): number {
    return this.#items.length;
  }

  /** Adds an item. */
  push(item: T): void {
    const items = this.#items;
    let i = items.length;
    items.push(item);
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!this.#less(item, items[up])) break;
      items[i] = items[up];
      i = up;
    }
    items[i] = item;
  }

  /** The smallest item, left in place, or undefined when empty. */
  peek(): T | undefined {
    return this.#items[0];
  }

  /** The items, in no particular order. */
  values(): readonly T[] {
    return this.#items;
  }

  /** Removes and returns the smallest item, or undefined when empty. */
  pop(): T | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    const n = items.length;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && this.#less(items[r], items[l]) ? r : l;
      if (!this.#less(items[c], last)) break;
      items[i] = items[c];
      i = c;
    }
    items[i] = last;
    return top;
  }
}
