/**
 * Router discovery (`--router-selector`): router pods mapped to the mesh's members as SMG maps
 * them. A pod that is Running and Ready is `ready` at its pod IP and the port of its
 * `sglang.ai/mesh-port` annotation (else this router's own mesh port); one not ready (or
 * without an IP yet) is `not_ready`; one deleted or terminating is `gone`, as is one missing
 * from a relist. The member is named by the pod (routers run with `--mesh-server-name` set to
 * their pod name). What the membership does with it (contact, suspect, mark DOWN, never raise an
 * incarnation) is the SWIM core's (`SwimEvent` "discovered").
 */

import {
  annotationPort,
  hostPort,
  isServing,
  isTerminating,
  MESH_PORT_ANNOTATION,
  type Pod,
} from "./pods.ts";

/** Where router pods' states go (the mesh node). */
export type RouterSink = (
  name: string,
  address: string,
  state: "ready" | "not_ready" | "gone",
) => void;

/** Router pods in, membership hints out. */
export class RouterDiscovery {
  readonly #sink: RouterSink;
  readonly #ownPort: number;
  /** Router pods seen, by name, with their last address. */
  readonly #seen = new Map<string, string>();

  /** Hints go to `sink`; a pod without the annotation listens on `ownMeshPort`. */
  constructor(sink: RouterSink, ownMeshPort: number) {
    this.#sink = sink;
    this.#ownPort = ownMeshPort;
  }

  /** A full list of router pods. */
  onList(pods: readonly Pod[]): void {
    const names = new Set<string>();
    for (const p of pods) {
      const name = p.metadata?.name;
      if (!name) continue;
      names.add(name);
      this.#pod(p, false);
    }
    for (const [name, address] of [...this.#seen]) {
      if (names.has(name)) continue;
      this.#seen.delete(name);
      this.#sink(name, address, "gone");
    }
  }

  /** One watch event. */
  onEvent(type: "ADDED" | "MODIFIED" | "DELETED", pod: Pod): void {
    this.#pod(pod, type === "DELETED");
  }

  #pod(p: Pod, deleted: boolean): void {
    const name = p.metadata?.name;
    if (!name) return;
    const ip = p.status?.podIP ?? "";
    const address = ip === ""
      ? this.#seen.get(name) ?? ""
      : hostPort(ip, annotationPort(p, MESH_PORT_ANNOTATION) ?? this.#ownPort);
    if (deleted || isTerminating(p)) {
      this.#seen.delete(name);
      return this.#sink(name, address, "gone");
    }
    if (address !== "") this.#seen.set(name, address);
    this.#sink(name, address, ip !== "" && isServing(p) ? "ready" : "not_ready");
  }
}
