/**
 * A gRPC worker's status as the HTTP status it stands for, so a failed call is judged the way
 * an HTTP worker's answer would be (retryable or not, breaker outcome, metrics).
 */

/** The gRPC status codes the mapping needs (the values of `@grpc/grpc-js`'s `status`). */
export const GrpcStatus = {
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** The HTTP status a worker's gRPC status stands for. */
export function httpStatusOf(code: number): number {
  switch (code) {
    case GrpcStatus.INVALID_ARGUMENT:
    case GrpcStatus.OUT_OF_RANGE:
    case GrpcStatus.FAILED_PRECONDITION:
      return 400;
    case GrpcStatus.NOT_FOUND:
      return 404;
    case GrpcStatus.RESOURCE_EXHAUSTED:
      return 429;
    case GrpcStatus.UNIMPLEMENTED:
      return 501;
    case GrpcStatus.DEADLINE_EXCEEDED:
      return 504;
    case GrpcStatus.UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}

/** Whether a call that failed with `code` failed in transport (no answer from the worker). */
export function isTransportStatus(code: number | undefined): boolean {
  return code === undefined || code === GrpcStatus.UNAVAILABLE || code === GrpcStatus.CANCELLED;
}
