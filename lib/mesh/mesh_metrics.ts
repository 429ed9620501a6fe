/**
 * The mesh's Prometheus metrics, registered in the gateway's registry. SMG's three keep SMG's
 * semantics: `router_mesh_peer_connections` is set by the router that
 * accepts a stream (1 with `peer=""` at accept, left at 1, then 1 for the learned name and 0
 * when the stream ends, kept after the peer is gone), `router_mesh_peer_reconnects_total`
 * counts accepted streams that ended, and `router_mesh_sync_round_duration_seconds` is observed
 * by the opener for each round's sending. The rest are ours.
 */

import type client from "prom-client";
import { FastCounter, FastGauge, FastHistogram } from "../metrics/fast.ts";
import { DURATION_BUCKETS } from "../metrics/families.ts";

/** Round-trip buckets for probes, 0.5 ms to 10 s. */
const RTT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

/** Every mesh metric. */
export class MeshMetrics {
  /** router_mesh_peer_connections{peer} */
  readonly peerConnections: FastGauge;
  /** router_mesh_peer_reconnects_total{peer} */
  readonly peerReconnects: FastCounter;
  /** router_mesh_sync_round_duration_seconds{peer} */
  readonly syncRound: FastHistogram;
  /** router_mesh_members{status} (ours): members this router knows, by status, itself included */
  readonly members: FastGauge;
  /** router_mesh_probes_total{result} (ours): result = ack | indirect_ack | failed */
  readonly probes: FastCounter;
  /** router_mesh_probe_rtt_seconds (ours): direct probe round trips */
  readonly probeRtt: FastHistogram;
  /** router_mesh_ping_reqs_total{role} (ours): role = sent | served */
  readonly pingReqs: FastCounter;
  /** router_mesh_suspicions_total (ours): members this router moved to SUSPECTED */
  readonly suspicions: FastCounter;
  /** router_mesh_refutations_total (ours): suspicions of this router it refuted */
  readonly refutations: FastCounter;
  /** router_mesh_dropped_frames_total{peer,direction} (ours): stream queue overflows */
  readonly droppedFrames: FastCounter;
  /** router_mesh_rejected_total{reason} (ours): peer input refused */
  readonly rejected: FastCounter;
  /** router_mesh_local_health (ours): Lifeguard score, 0 is healthy */
  readonly localHealth: FastGauge;
  /** router_mesh_store_ops_total{namespace,result} (ours): sent, received, applied, dropped */
  readonly storeOps: FastCounter;
  /** router_mesh_store_keys{namespace,kind} (ours): live keys and tombstones held */
  readonly storeKeys: FastGauge;
  /** router_mesh_anti_entropy_total (ours): store summaries sent */
  readonly antiEntropy: FastCounter;
  /** `router_mesh_store_ack_seconds`: a write's time from sending to its peer's ack. */
  readonly storeAckLag: FastHistogram;
  /** `router_mesh_tree_deltas_total{result}`. */
  readonly treeDeltas: FastCounter;
  /** `router_mesh_tree_repairs_total{result}`. */
  readonly treeRepairs: FastCounter;
  /** `router_mesh_tree_repair_pages_total{result}`. */
  readonly treePages: FastCounter;
  /** `router_mesh_tree_bytes_sent_total{type}`. */
  readonly treeBytes: FastCounter;
  /** `router_mesh_tree_corrections_total{result}`. */
  readonly treeCorrections: FastCounter;
  /** `router_mesh_load_reports_total{result}`. */
  readonly loadReports: FastCounter;
  /** `router_mesh_load_bytes_sent_total`. */
  readonly loadBytes: FastCounter;

  /** Registers the mesh metrics in `r`. */
  constructor(r: client.Registry) {
    this.peerConnections = new FastGauge(
      r,
      "router_mesh_peer_connections",
      "Sync streams this router accepted, by peer (1 open, 0 closed)",
      ["peer"],
    );
    this.peerReconnects = new FastCounter(
      r,
      "router_mesh_peer_reconnects_total",
      "Accepted sync streams that ended",
      ["peer"],
    );
    this.syncRound = new FastHistogram(
      r,
      "router_mesh_sync_round_duration_seconds",
      "Time to build and queue one round of a stream this router opened",
      ["peer"],
      DURATION_BUCKETS,
    );
    this.members = new FastGauge(r, "router_mesh_members", "Known mesh members by status", [
      "status",
    ]);
    this.probes = new FastCounter(r, "router_mesh_probes_total", "Probes by result", ["result"]);
    this.probeRtt = new FastHistogram(
      r,
      "router_mesh_probe_rtt_seconds",
      "Round-trip time of direct probes that were acked",
      [],
      RTT_BUCKETS,
    );
    this.pingReqs = new FastCounter(r, "router_mesh_ping_reqs_total", "Indirect probes", [
      "role",
    ]);
    this.suspicions = new FastCounter(
      r,
      "router_mesh_suspicions_total",
      "Members this router moved to SUSPECTED",
      [],
    );
    this.refutations = new FastCounter(
      r,
      "router_mesh_refutations_total",
      "Suspicions of this router that it refuted",
      [],
    );
    this.droppedFrames = new FastCounter(
      r,
      "router_mesh_dropped_frames_total",
      "Sync-stream frames dropped on a full queue",
      ["peer", "direction"],
    );
    this.rejected = new FastCounter(
      r,
      "router_mesh_rejected_total",
      "Mesh input refused (malformed, oversized, flood, name_conflict, identity, unknown_frame, bind)",
      ["reason"],
    );
    this.localHealth = new FastGauge(
      r,
      "router_mesh_local_health",
      "Lifeguard local-health score; timeouts are stretched by score + 1",
      [],
    );
    this.storeOps = new FastCounter(
      r,
      "router_mesh_store_ops_total",
      "Replicated-store writes by result (sent, received, applied, dropped)",
      ["namespace", "result"],
    );
    this.storeKeys = new FastGauge(r, "router_mesh_store_keys", "Replicated-store keys held", [
      "namespace",
      "kind",
    ]);
    this.antiEntropy = new FastCounter(
      r,
      "router_mesh_anti_entropy_total",
      "Anti-entropy summaries sent (stream opened, or the periodic exchange)",
      [],
    );
    this.storeAckLag = new FastHistogram(
      r,
      "router_mesh_store_ack_seconds",
      "Replication lag: seconds from sending a replicated-store write to its peer's ack",
      [],
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    );
    this.treeDeltas = new FastCounter(
      r,
      "router_mesh_tree_deltas_total",
      "Cache-tree deltas by result (sent: summed over peers, received, applied: path known here, unknown: path new here, dropped)",
      ["result"],
    );
    this.treeRepairs = new FastCounter(
      r,
      "router_mesh_tree_repairs_total",
      "Cache-tree repair sessions by result (started, finished, failed, retried, folded: its target named more unknown paths, queued: another peer did, refused: a request this router declined)",
      ["result"],
    );
    this.treePages = new FastCounter(
      r,
      "router_mesh_tree_repair_pages_total",
      "Cache-tree repair pages by result (sent, received, stale), and entries_skipped (paths too long to send)",
      ["result"],
    );
    this.treeBytes = new FastCounter(
      r,
      "router_mesh_tree_bytes_sent_total",
      "Bytes of cache-tree envelopes sent, by type (deltas, pages), summed over peers",
      ["type"],
    );
    this.treeCorrections = new FastCounter(
      r,
      "router_mesh_tree_corrections_total",
      "Cache-tree corrections (tree feedback) by result (sent: summed over peers, received, relayed: placements this router's own tree forgot with a peer's correction, published in turn, dropped)",
      ["result"],
    );
    this.loadReports = new FastCounter(
      r,
      "router_mesh_load_reports_total",
      "Load-sync reports (this router's in-flight requests and prefill backlog per worker) by result (sent: summed over peers, received, refused)",
      ["result"],
    );
    this.loadBytes = new FastCounter(
      r,
      "router_mesh_load_bytes_sent_total",
      "Bytes of load-sync reports sent, summed over peers",
      [],
    );
  }
}
