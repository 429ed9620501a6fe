/**
 * grpc-js logs to the console unless told otherwise; every module that loads it (the gRPC worker
 * client, the mesh transport, the OTLP/gRPC exporter) reports through its own callbacks instead.
 * Its own variables (`GRPC_VERBOSITY`, `GRPC_NODE_VERBOSITY`) still turn the logs back on for
 * debugging.
 */

/** The part of the grpc-js module this touches. */
export interface GrpcLogging {
  setLogVerbosity(v: number): void;
  logVerbosity: { NONE: number };
}

/** Silences grpc-js's console logs unless its own variables ask for them. */
export function quietGrpcLogs(grpc: GrpcLogging): void {
  const asked = (name: string) => {
    try {
      return Deno.env.get(name) !== undefined;
    } catch {
      return false; // not readable: not asked
    }
  };
  if (!asked("GRPC_VERBOSITY") && !asked("GRPC_NODE_VERBOSITY")) {
    grpc.setLogVerbosity(grpc.logVerbosity.NONE);
  }
}
