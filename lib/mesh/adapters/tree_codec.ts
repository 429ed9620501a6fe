/**
 * Wire form of cache-aware tree sync (`TreeDeltas`, `TreeRepairRequest`, `TreeRepairPage` and
 * the `TreeCorrection`s both carry, in `proto/mesh.proto`). Worker URLs are sent once per group
 * or page and referenced by index, so a delta costs its 8-byte hash and about one byte. Decoding
 * refuses malformed bytes, hashes past 2^53, worker indexes out of range and a correction's
 * branch of the other tree kind with `{ ok: false }` instead of throwing.
 */

import protobuf from "protobufjs";
import type { TreeKind } from "../../policies/cache_aware/shared_paths.ts";
import type { TreeCorrection, TreeEntry, TreeRole } from "../../policies/replicas.ts";
import { MESH_PROTO } from "../transport/codec.ts";
import { decode, type Decoded, safe } from "../store/store_codec.ts";

/** One round's decisions of one policy, model and kind. */
export interface DeltaGroup {
  role: TreeRole;
  model: string;
  kind: TreeKind;
  /** Hash and worker URL of each decision. */
  deltas: { hash: number; worker: string }[];
  /** Corrections, each after the first `after` deltas. */
  corrections: { after: number; correction: TreeCorrection }[];
}

/** A repair request. */
export interface RepairRequest {
  session: string;
  role: TreeRole;
  model: string;
  kind: TreeKind;
  /** Entries to skip. */
  cursor: number;
}

/** A repair page. */
export interface RepairPage {
  session: string;
  role: TreeRole;
  model: string;
  kind: TreeKind;
  index: number;
  entries: TreeEntry[];
  /** Entries consumed from the start of the tree, this page included. */
  nextCursor: number;
  last: boolean;
  /** The tree's corrections, applied before the entries (on a session's first page). */
  corrections: TreeCorrection[];
}

const root = protobuf.parse(MESH_PROTO, { keepCase: true }).root;
const DeltasT = root.lookupType("smg.mesh.v1.TreeDeltas");
const RequestT = root.lookupType("smg.mesh.v1.TreeRepairRequest");
const PageT = root.lookupType("smg.mesh.v1.TreeRepairPage");

/** A map key for one tree: role, kind and model. */
export const groupKey = (role: TreeRole, model: string, kind: TreeKind): string =>
  `${role}\u0000${kind}\u0000${model}`;

const KINDS: readonly TreeKind[] = ["string", "token"];
const ROLES: readonly TreeRole[] = ["main", "prefill", "decode"];
const roleOut = (r: TreeRole) => (r === "main" ? "" : r);

function roleIn(s: string): TreeRole {
  const r = s === "" ? "main" : s as TreeRole;
  if (!ROLES.includes(r) || s === "main") throw new Error(`unknown role '${s}'`);
  return r;
}

function kindIn(k: number): TreeKind {
  const kind = KINDS[k];
  if (kind === undefined) throw new Error(`unknown tree kind ${k}`);
  return kind;
}

function at<T>(list: readonly T[], i: number): T {
  if (i >= list.length) throw new Error(`worker index ${i} out of range`);
  return list[i];
}

/** Interns worker URLs as indexes. */
class Urls {
  readonly list: string[] = [];
  readonly #index = new Map<string, number>();
  of(url: string): number {
    let i = this.#index.get(url);
    if (i === undefined) this.#index.set(url, i = this.list.push(url) - 1);
    return i;
  }
}

interface CorrectionPb {
  id: string;
  worker_index: number;
  text?: string;
  tokens?: { ids: number[] };
  kept: string;
  hashes: string[];
  age_ms: string;
  after: number;
}

function correctionOut(c: TreeCorrection, urls: Urls, after = 0) {
  const branch = c.branch === null
    ? {}
    : typeof c.branch === "string"
    ? { text: c.branch }
    : { tokens: { ids: c.branch } };
  return {
    id: c.id,
    worker_index: urls.of(c.worker),
    ...branch,
    kept: c.kept,
    hashes: c.hashes,
    age_ms: Math.max(0, Math.round(c.ageMs)),
    after,
  };
}

function correctionIn(c: CorrectionPb, kind: TreeKind, workers: string[]): TreeCorrection {
  const text = c.text !== undefined && c.text !== null;
  const tokens = c.tokens !== undefined && c.tokens !== null;
  if ((text && kind !== "string") || (tokens && kind !== "token")) {
    throw new Error(`correction ${c.id}: a branch of the other tree kind`);
  }
  return {
    id: c.id,
    worker: at(workers, c.worker_index),
    branch: text ? c.text! : tokens ? c.tokens!.ids : null,
    kept: safe(c.kept),
    hashes: c.hashes.map(safe),
    ageMs: safe(c.age_ms),
  };
}

/** Path units a correction carries. */
export const correctionUnits = (c: TreeCorrection): number => c.branch?.length ?? 0;

/** One round's envelope as received. */
export interface Deltas {
  /** Rounds the sender sent on this stream, this one included. */
  round: number;
  groups: DeltaGroup[];
}

/**
 * Stamps encoded groups (`encodeDeltas`) with a stream's round number: protobuf merges
 * concatenated messages, so the groups are encoded once for every peer.
 */
export function withRound(groups: Uint8Array, round: number): Uint8Array {
  const head = DeltasT.encode({ round }).finish();
  const out = new Uint8Array(head.byteLength + groups.byteLength);
  out.set(head);
  out.set(groups, head.byteLength);
  return out;
}

/** Encodes one round of delta groups (without the round number: see `withRound`). */
export function encodeDeltas(groups: readonly DeltaGroup[]): Uint8Array {
  return DeltasT.encode({
    groups: groups.map((g) => {
      const urls = new Urls();
      return {
        role: roleOut(g.role),
        model: g.model,
        kind: KINDS.indexOf(g.kind),
        hashes: g.deltas.map((d) => d.hash),
        worker_index: g.deltas.map((d) => urls.of(d.worker)),
        corrections: g.corrections.map((c) => correctionOut(c.correction, urls, c.after)),
        workers: urls.list,
      };
    }),
  }).finish();
}

interface GroupPb {
  role: string;
  model: string;
  kind: number;
  workers: string[];
  hashes: string[];
  worker_index: number[];
  corrections: CorrectionPb[];
}

/** Decodes one round of delta groups. */
export function decodeDeltas(bytes: Uint8Array): Decoded<Deltas> {
  return decode(DeltasT, bytes, (o: { groups: GroupPb[]; round: string }) => ({
    round: safe(o.round),
    groups: o.groups.map((g) => {
      if (g.hashes.length !== g.worker_index.length) throw new Error("hashes and workers differ");
      const kind = kindIn(g.kind);
      return {
        role: roleIn(g.role),
        model: g.model,
        kind,
        deltas: g.hashes.map((h, i) => ({
          hash: safe(h),
          worker: at(g.workers, g.worker_index[i]),
        })),
        corrections: g.corrections.map((c) => ({
          after: Math.min(c.after, g.hashes.length),
          correction: correctionIn(c, kind, g.workers),
        })),
      };
    }),
  }));
}

/** Encodes a repair request. */
export function encodeRequest(r: RepairRequest): Uint8Array {
  return RequestT.encode({ ...r, role: roleOut(r.role), kind: KINDS.indexOf(r.kind) }).finish();
}

/** Decodes a repair request. */
export function decodeRequest(bytes: Uint8Array): Decoded<RepairRequest> {
  return decode(RequestT, bytes, (o: {
    session: string;
    role: string;
    model: string;
    kind: number;
    cursor: string;
  }) => ({
    session: o.session,
    role: roleIn(o.role),
    model: o.model,
    kind: kindIn(o.kind),
    cursor: safe(o.cursor),
  }));
}

/** Units two paths share from their start. */
export function sharedPrefix(
  a: string | readonly number[],
  b: string | readonly number[],
): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  if (typeof a === "string" && typeof b === "string") {
    while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
    // Never split a surrogate pair: the suffix must be valid UTF-16 to travel as a string.
    if (i > 0 && i < b.length && (b.charCodeAt(i) & 0xfc00) === 0xdc00) i--;
  } else while (i < n && a[i] === b[i]) i++;
  return i;
}

/** The path of a path entry, else null. */
export const pathOf = (e: TreeEntry): string | readonly number[] | null =>
  "path" in e ? e.path : "tokens" in e ? e.tokens : null;

/** Encodes a repair page, front-coding each path against the previous one. */
export function encodePage(p: RepairPage): Uint8Array {
  const urls = new Urls();
  let prev: string | readonly number[] | null = null;
  const entries = p.entries.map((e) => {
    const tenants = e.tenants.map((t) => urls.of(t));
    const path = pathOf(e);
    if (path === null) return { hash: (e as { hash: number }).hash, tenants };
    const shared = prev !== null && typeof prev === typeof path ? sharedPrefix(prev, path) : 0;
    prev = path;
    if (typeof path === "string") return { text: path.slice(shared), tenants, shared };
    return { tokens: { ids: path.slice(shared) }, tenants, shared };
  });
  return PageT.encode({
    session: p.session,
    role: roleOut(p.role),
    model: p.model,
    kind: KINDS.indexOf(p.kind),
    index: p.index,
    entries,
    next_cursor: p.nextCursor,
    last: p.last,
    corrections: p.corrections.map((c) => correctionOut(c, urls)),
    workers: urls.list,
  }).finish();
}

interface EntryPb {
  text?: string;
  tokens?: { ids: number[] };
  hash?: string;
  tenants: number[];
  shared: number;
}

/** What a page is, before its entries are expanded. */
export type PageHead = Omit<RepairPage, "entries" | "corrections">;

/** Most path units a decoded page may expand to by default (2^22). */
export const MAX_PAGE_UNITS = 1 << 22;

/**
 * Decodes a repair page. `accept` sees the page's head first: a page it declines decodes to
 * null without expanding its entries. Front-coded paths that would expand past `maxUnits` in
 * all make the page malformed (a small page cannot cost unbounded memory).
 */
export function decodePage(
  bytes: Uint8Array,
  accept: (head: PageHead) => boolean = () => true,
  maxUnits = MAX_PAGE_UNITS,
): Decoded<RepairPage | null> {
  return decode(PageT, bytes, (o: {
    session: string;
    role: string;
    model: string;
    kind: number;
    index: number;
    workers: string[];
    entries: EntryPb[];
    next_cursor: string;
    last: boolean;
    corrections: CorrectionPb[];
  }) => {
    const head: PageHead = {
      session: o.session,
      role: roleIn(o.role),
      model: o.model,
      kind: kindIn(o.kind),
      index: o.index,
      nextCursor: safe(o.next_cursor),
      last: o.last,
    };
    if (!accept(head)) return null;
    const corrections = o.corrections.map((c) => correctionIn(c, head.kind, o.workers));
    const units = corrections.reduce((n, c) => n + correctionUnits(c), 0);
    if (units > maxUnits) throw new Error(`page expands past ${maxUnits} path units`);
    const entries = decodeEntries(o.entries, o.workers, maxUnits - units);
    return { ...head, entries, corrections };
  });
}

/** Page entries with their paths restored from the front coding. */
function decodeEntries(entries: EntryPb[], workers: string[], maxUnits: number): TreeEntry[] {
  let prev: string | readonly number[] | null = null;
  let units = 0;
  return entries.map((e): TreeEntry => {
    const tenants = e.tenants.map((i) => at(workers, i));
    if (e.hash !== undefined && e.hash !== null) return { hash: safe(e.hash), tenants };
    const tokens = e.tokens !== undefined && e.tokens !== null;
    const base = e.shared > 0 ? prev : tokens ? [] : "";
    if (base === null || base.length < e.shared || typeof base === "string" === tokens) {
      throw new Error(`entry shares ${e.shared} units with no such previous path`);
    }
    units += e.shared + (tokens ? e.tokens!.ids.length : (e.text ?? "").length);
    if (units > maxUnits) throw new Error(`page expands past ${maxUnits} path units`);
    const path: string | readonly number[] = tokens
      ? [...(base as readonly number[]).slice(0, e.shared), ...e.tokens!.ids]
      : (base as string).slice(0, e.shared) + (e.text ?? "");
    prev = path;
    return typeof path === "string" ? { path, tenants } : { tokens: path, tenants };
  });
}
