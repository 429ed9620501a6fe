/**
 * The own HTTP/1.1 front's limits on its clients (`GatewayConfig.front`, re-exported by
 * `types.ts`): connection caps, the request-head deadline and the request-body deadline with its
 * minimum rate. `--http-server deno` (`Deno.serve`) has none of them; each field names its flag.
 */

/** Limits of the own front (`--http-server own`) on its clients; 0 turns a limit off. */
export interface FrontLimitsConfig {
  /** Open client connections at most; more are closed at once (`--max-connections`). */
  maxConnections: number;
  /** Open connections from one client address at most (`--max-connections-per-client`). */
  maxConnectionsPerClient: number;
  /**
   * Seconds a request head may take: from accept for a connection's first request, from the
   * head's first byte for the next ones; then 408 and close (`--request-head-timeout-secs`).
   */
  requestHeadTimeoutSecs: number;
  /**
   * Seconds a request body may take once the gateway reads it, plus one second per
   * `requestBodyMinRate` bytes received; then 408 and close (`--request-body-timeout-secs`).
   */
  requestBodyTimeoutSecs: number;
  /** Body bytes that earn one more second of `requestBodyTimeoutSecs` (`--request-body-min-rate`). */
  requestBodyMinRate: number;
}
