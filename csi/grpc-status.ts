/**
 * gRPC's status codes, as the protocol numbers them (grpc's doc/statuscodes.md) and grpc-js's `status`
 * names them: here so that the service thread (csi/service-thread-worker.ts), which answers every
 * call with one, does not load grpc-js and protobufjs, about half a megabyte of script it would only
 * parse (test/csi/unit/grpc-status.test.ts checks each against grpc-js's).
 */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

export type GrpcStatusName = keyof typeof GrpcStatus;
export type GrpcStatusCode = (typeof GrpcStatus)[GrpcStatusName];

const NAMES = new Map<number, GrpcStatusName>(Object.entries(GrpcStatus).map(([name, code]) => [code, name as GrpcStatusName]));

/** A code's name ("NOT_FOUND"), as the log lines and metrics show it; an unknown number as itself. */
export function statusName(code: number): string {
  return NAMES.get(code) ?? String(code);
}
