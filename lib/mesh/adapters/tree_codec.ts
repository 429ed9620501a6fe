/**
 * Wire form of cache-aware tree sync (`TreeDeltas`, `TreeRepairRequest`, `TreeRepairPage` in
 * `proto/mesh.proto`). Worker URLs are sent once per group or page and referenced by index, so
 * a delta costs its 8-byte hash and about one byte. Decoding refuses malformed bytes, hashes
 * past 2^53 and worker indexes out of range with `{ ok: false }` instead of throwing.
 */

import protobuf from "protobufjs";
import type { TreeKind } from "../../policies/cache_aware/shared_paths.ts";
import type { TreeEntry, TreeRole } from "../../policies/replicas.ts";
import { MESH_PROTO } from "../transport/codec.ts";
import { decode, type Decoded, safe } from "../store/store_codec.ts";

/** One round's decisions of one policy, model and kind. */
export interface DeltaGroup {
  role: TreeRole;
  model: string;
  kind: TreeKind;
  /** Hash and worker URL of each decision. */
  deltas: { hash: number; worker: string }[];
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
}

const root = protobuf.parse(MESH_PROTO, { keepCase: true }).root;
const DeltasT = root.lookupType("smg.mesh.v1.TreeDeltas");
const RequestT = root.lookupType("smg.mesh.v1.TreeRepairRequest");
const PageT = root.lookupType("smg.mesh.v1.TreeRepairPage");

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
}

/** Decodes one round of delta groups. */
export function decodeDeltas(bytes: Uint8Array): Decoded<Deltas> {
  return decode(DeltasT, bytes, (o: { groups: GroupPb[]; round: string }) => ({
    round: safe(o.round),
    groups: o.groups.map((g) => {
      if (g.hashes.length !== g.worker_index.length) throw new Error("hashes and workers differ");
      return {
        role: roleIn(g.role),
        model: g.model,
        kind: kindIn(g.kind),
        deltas: g.hashes.map((h, i) => ({
          hash: safe(h),
          worker: at(g.workers, g.worker_index[i]),
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

/** Encodes a repair page. */
export function encodePage(p: RepairPage): Uint8Array {
  const urls = new Urls();
  const entries = p.entries.map((e) => {
    const tenants = e.tenants.map((t) => urls.of(t));
    if ("path" in e) return { text: e.path, tenants };
    if ("tokens" in e) return { tokens: { ids: e.tokens }, tenants };
    return { hash: e.hash, tenants };
  });
  return PageT.encode({
    session: p.session,
    role: roleOut(p.role),
    model: p.model,
    kind: KINDS.indexOf(p.kind),
    index: p.index,
    workers: urls.list,
    entries,
    next_cursor: p.nextCursor,
    last: p.last,
  }).finish();
}

interface EntryPb {
  text?: string;
  tokens?: { ids: number[] };
  hash?: string;
  tenants: number[];
}

/** Decodes a repair page. */
export function decodePage(bytes: Uint8Array): Decoded<RepairPage> {
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
  }) => ({
    session: o.session,
    role: roleIn(o.role),
    model: o.model,
    kind: kindIn(o.kind),
    index: o.index,
    entries: o.entries.map((e): TreeEntry => {
      const tenants = e.tenants.map((i) => at(o.workers, i));
      if (e.text !== undefined && e.text !== "") return { path: e.text, tenants };
      if (e.tokens !== undefined && e.tokens !== null) return { tokens: e.tokens.ids, tenants };
      if (e.hash !== undefined) return { hash: safe(e.hash), tenants };
      return { path: "", tenants };
    }),
    nextCursor: safe(o.next_cursor),
    last: o.last,
  }));
}
