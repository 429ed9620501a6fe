/**
 * Drivers for the cache_aware radix-tree suite: each tree seen through strings (the token tree
 * with one whole page per character, so both must answer alike), seeded random texts, and a
 * naive model of what a tree without eviction should answer (matches and per-tenant sizes).
 */

import assert from "node:assert/strict";
import type { Random } from "../../lib/core/clock.ts";
import { StringTree } from "../../lib/policies/cache_aware/string_tree.ts";
import { TokenTree } from "../../lib/policies/cache_aware/token_tree.ts";
import type { PrefixMatch } from "../../lib/policies/cache_aware/tree_types.ts";

/** A match as plain data (what the suite compares). */
export type Match = Omit<PrefixMatch, "depths">;

/** A match without its `depths` function. */
function plain(m: PrefixMatch): Match {
  return { matched: m.matched, total: m.total, tenants: m.tenants };
}

/** A tree seen through strings, with sizes in characters. */
export interface TreeUnderTest {
  matchAndInsert(text: string, choose: (m: Match) => string | null): Match;
  match(text: string): Match;
  /** Each tenant's own matched characters for `text` (`PrefixMatch.depths`). */
  depths(text: string): Map<string, number>;
  insert(text: string, tenant: string): void;
  apply(text: string, tenant: string): void;
  evict(budget: number): number;
  removeTenant(tenant: string): void;
  /** The stamp of the latest insert. */
  stamp(): number;
  /** `forgetBeyond` with `depth` in characters; returns characters removed. */
  forgetBeyond(
    text: string,
    tenant: string,
    depth: number,
    before: number,
    stale?: (path: string, from: number) => void,
  ): number;
  size(): number;
  tenantSize(tenant: string): number;
  tenants(): string[];
  nodeCount(): number;
  entries(): { text: string; tenant: string; stamp: number }[];
  audit(): string[];
  /** Texts passed to the insert sink, as `text@tenant`. */
  sunk: string[];
}

/** A `StringTree` under test. */
export function stringTree(): TreeUnderTest {
  const sunk: string[] = [];
  const t = new StringTree({ onInsert: (text, tenant) => sunk.push(`${text}@${tenant}`) });
  return {
    matchAndInsert: (text, choose) => plain(t.matchAndInsert(text, (m) => choose(plain(m))).match),
    match: (text) => plain(t.match(text)),
    depths: (text) => new Map(t.match(text).depths()),
    insert: (text, tenant) => t.insert(text, tenant),
    apply: (text, tenant) => t.apply(text, tenant),
    evict: (budget) => t.evict(budget),
    removeTenant: (tenant) => t.removeTenant(tenant),
    stamp: () => t.stamp,
    forgetBeyond: (text, tenant, depth, before, stale) =>
      t.forgetBeyond(text, tenant, depth, before, stale),
    size: () => t.size,
    tenantSize: (tenant) => t.tenantSize(tenant),
    tenants: () => t.tenants(),
    nodeCount: () => t.nodeCount,
    entries: () => [...t.export()],
    audit: () => t.audit(),
    sunk,
  };
}

/** Token ids for `text`: one page of `page` ids per character. */
export function encode(text: string, page: number): number[] {
  const ids: number[] = [];
  for (let i = 0; i < text.length; i++) {
    for (let j = 0; j < page; j++) ids.push(text.charCodeAt(i) * page + j);
  }
  return ids;
}

/** The text `encode` made `ids` from. */
export function decode(ids: readonly number[], page: number): string {
  let text = "";
  for (let i = 0; i < ids.length; i += page) text += String.fromCharCode(ids[i] / page);
  return text;
}

/** A `TokenTree` of page size `page` under test, each character one page. */
export function tokenTree(page: number): TreeUnderTest {
  const sunk: string[] = [];
  const t = new TokenTree({
    pageSize: page,
    onInsert: (ids, tenant) => sunk.push(`${decode(ids, page)}@${tenant}`),
  });
  const chars = (m: PrefixMatch): Match => {
    assert.equal(m.matched % page, 0, "matched whole pages");
    return { matched: m.matched / page, total: m.total / page, tenants: m.tenants };
  };
  return {
    matchAndInsert: (text, choose) =>
      chars(t.matchAndInsert(encode(text, page), (m) => choose(chars(m))).match),
    match: (text) => chars(t.match(encode(text, page))),
    depths: (text) => {
      const out = new Map<string, number>();
      for (const [tenant, d] of t.match(encode(text, page)).depths()) {
        assert.equal(d % page, 0, "depths in whole pages");
        out.set(tenant, d / page);
      }
      return out;
    },
    insert: (text, tenant) => t.insert(encode(text, page), tenant),
    apply: (text, tenant) => t.apply(encode(text, page), tenant),
    evict: (budget) => t.evict(budget * page) / page,
    removeTenant: (tenant) => t.removeTenant(tenant),
    stamp: () => t.stamp,
    forgetBeyond: (text, tenant, depth, before, stale) =>
      t.forgetBeyond(
        encode(text, page),
        tenant,
        depth * page,
        before,
        stale && ((path, from) => stale(decode(path, page), from / page)),
      ) / page,
    size: () => t.size / page,
    tenantSize: (tenant) => t.tenantSize(tenant) / page,
    tenants: () => t.tenants(),
    nodeCount: () => t.nodeCount,
    entries: () =>
      [...t.export()].map((e) => ({
        text: decode(e.tokens, page),
        tenant: e.tenant,
        stamp: e.stamp,
      })),
    audit: () => t.audit(),
    sunk,
  };
}

/** A random string of 1..`max` characters over `alphabet`. */
export function randomText(random: Random, alphabet: string, max: number): string {
  const n = 1 + Math.floor(random() * max);
  let s = "";
  for (let i = 0; i < n; i++) s += alphabet[Math.floor(random() * alphabet.length)];
  return s;
}

/** Longest common prefix length of two strings. */
function lcp(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/** Per tenant, how many distinct non-empty prefixes its texts have: its size in a trie. */
export function trieSizes(texts: Iterable<{ text: string; tenant: string }>): Map<string, number> {
  const prefixes = new Map<string, Set<string>>();
  for (const { text, tenant } of texts) {
    const set = prefixes.get(tenant) ?? new Set();
    prefixes.set(tenant, set);
    for (let i = 1; i <= text.length; i++) set.add(text.slice(0, i));
  }
  return new Map([...prefixes].map(([t, s]) => [t, s.size]));
}

/**
 * What the tree should answer for `text` given each tenant's inserted texts and when each was
 * last inserted (no eviction): the longest common prefix with any of them, and the tenants with
 * a text reaching that deep, by their latest such insert.
 */
export function naiveMatch(model: Map<string, Map<string, number>>, text: string): Match {
  let matched = 0;
  for (const texts of model.values()) {
    for (const s of texts.keys()) matched = Math.max(matched, lcp(s, text));
  }
  if (matched === 0) return { matched, total: text.length, tenants: [] };
  const latest: [string, number][] = [];
  for (const [tenant, texts] of model) {
    let when = -1;
    for (const [s, step] of texts) if (lcp(s, text) >= matched) when = Math.max(when, step);
    if (when >= 0) latest.push([tenant, when]);
  }
  latest.sort((a, b) => b[1] - a[1]);
  return { matched, total: text.length, tenants: latest.slice(0, 8).map(([t]) => t) };
}

/** What `depths` should answer: per tenant, its longest common prefix with `text` (> 0). */
export function naiveDepths(
  model: Map<string, Map<string, number>>,
  text: string,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const [tenant, texts] of model) {
    let d = 0;
    for (const s of texts.keys()) d = Math.max(d, lcp(s, text));
    if (d > 0) out.set(tenant, d);
  }
  return out;
}
