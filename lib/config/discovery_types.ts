/**
 * Kubernetes discovery's part of the gateway configuration (`GatewayConfig.discovery`,
 * re-exported by `types.ts`), each field naming its flag.
 */

/** Where a discovered worker's model id comes from (`--model-id-from`). */
export type ModelIdSource =
  | { from: "namespace" }
  | { from: "label"; key: string }
  | { from: "annotation"; key: string };

/** Kubernetes service discovery (`--service-discovery`). */
export interface DiscoveryConfig {
  /** Watch pods and register the matching ones as workers (`--service-discovery`). */
  enabled: boolean;
  /** Labels a worker pod carries, all of them (`--selector k=v...`). */
  selector: Record<string, string>;
  /** PD: labels of prefill pods (`--prefill-selector`). */
  prefillSelector: Record<string, string>;
  /** PD: labels of decode pods (`--decode-selector`). */
  decodeSelector: Record<string, string>;
  /** Port of a discovered worker (`--service-discovery-port`). */
  port: number;
  /** Namespace watched; null: all (`--service-discovery-namespace`). */
  namespace: string | null;
  /** Model id of a discovered worker; null: its served models (`--model-id-from`). */
  modelIdFrom: ModelIdSource | null;
  /** Labels of router pods, for the mesh's membership (`--router-selector`). */
  routerSelector: Record<string, string>;
}
