/**
 * What a Kubernetes pod means to the gateway, as pure functions of the pod's JSON (the subset
 * of `v1.Pod` read here) and the discovery flags: whether it matches a selector, whether it is
 * serving (phase `Running` and condition `Ready=True`, not being deleted), and which worker it
 * is: `http://PODIP:PORT` (IPv6 in brackets), regular or a PD leg by which selector it matches
 * (prefill's bootstrap port from the `sglang.ai/bootstrap-port` annotation), and its model id
 * from `--model-id-from` (its namespace, a label or an annotation; none: the models it serves).
 * Router pods are read the same way (`sglang.ai/mesh-port`).
 */

import type { DiscoveryConfig } from "../config/config.ts";

/** The fields of a pod this module reads (Kubernetes `v1.Pod`). */
export interface Pod {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string | null;
    resourceVersion?: string;
  };
  status?: {
    phase?: string;
    podIP?: string;
    conditions?: { type?: string; status?: string }[];
  };
}

/** Annotation of a prefill pod's bootstrap port. */
export const BOOTSTRAP_PORT_ANNOTATION = "sglang.ai/bootstrap-port";
/** Annotation of a router pod's mesh port. */
export const MESH_PORT_ANNOTATION = "sglang.ai/mesh-port";

/** A worker a pod stands for. */
export interface PodWorker {
  /** The pod's uid (stable across its life; a recreated pod has a new one). */
  uid: string;
  /** `namespace/name`, for logs. */
  pod: string;
  url: string;
  type: "regular" | "prefill" | "decode";
  /** Prefill bootstrap port, or null. */
  bootstrapPort: number | null;
  /** The model id, or null (the worker's served models). */
  model: string | null;
  /** Running, Ready and not being deleted. */
  serving: boolean;
}

/** Whether `labels` carries every pair of `selector` (an empty selector matches nothing). */
export function matches(
  labels: Record<string, string> | undefined,
  selector: Record<string, string>,
): boolean {
  const keys = Object.keys(selector);
  if (keys.length === 0) return false;
  return keys.every((k) => labels?.[k] === selector[k]);
}

/** A label selector as the API server takes it: `k1=v1,k2=v2`. */
export function selectorQuery(selector: Record<string, string>): string {
  return Object.entries(selector).map(([k, v]) => `${k}=${v}`).join(",");
}

/** Phase Running and condition Ready=True, not being deleted. */
export function isServing(pod: Pod): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  if (pod.status?.phase !== "Running") return false;
  return pod.status.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/** Whether the pod is on its way out (deletion requested). */
export function isTerminating(pod: Pod): boolean {
  return !!pod.metadata?.deletionTimestamp;
}

/** A port from an annotation value, or null when absent or not 1..65535. */
export function annotationPort(pod: Pod, key: string): number | null {
  const v = pod.metadata?.annotations?.[key];
  if (v === undefined || !/^\d{1,5}$/.test(v.trim())) return null;
  const n = Number(v.trim());
  return n >= 1 && n <= 65535 ? n : null;
}

/** `host:port` with IPv6 in brackets. */
export function hostPort(ip: string, port: number): string {
  return ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/**
 * The worker `pod` stands for under `c`, or null when it is not one of ours (no selector
 * matches, or it has no uid yet). A pod without an IP yet is a worker that is not serving.
 */
export function podWorker(pod: Pod, c: DiscoveryConfig, pd: boolean): PodWorker | null {
  const m = pod.metadata;
  if (!m?.uid || !m.name) return null;
  const labels = m.labels;
  const type = pd
    ? matches(labels, c.prefillSelector)
      ? "prefill"
      : matches(labels, c.decodeSelector)
      ? "decode"
      : null
    : matches(labels, c.selector)
    ? "regular"
    : null;
  if (type === null) return null;
  const ip = pod.status?.podIP ?? "";
  const model = c.modelIdFrom === null
    ? null
    : c.modelIdFrom.from === "namespace"
    ? m.namespace ?? null
    : c.modelIdFrom.from === "label"
    ? labels?.[c.modelIdFrom.key] ?? null
    : m.annotations?.[c.modelIdFrom.key] ?? null;
  return {
    uid: m.uid,
    pod: `${m.namespace ?? ""}/${m.name}`,
    url: ip === "" ? "" : `http://${hostPort(ip, c.port)}`,
    type,
    bootstrapPort: type === "prefill" ? annotationPort(pod, BOOTSTRAP_PORT_ANNOTATION) : null,
    model,
    serving: ip !== "" && isServing(pod),
  };
}
