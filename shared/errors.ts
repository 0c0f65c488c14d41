/**
 * Errors the core raises. Each front end maps a code to its protocol: the CSI shim to a gRPC status,
 * the FlexVolume executable to {"status":"Failure"} with exit code 1. Messages are written for an
 * operator reading kubelet's log, so they name the volume or path and never carry option values.
 */
export type ErrorCode =
  | 'InvalidArgument'
  | 'NotFound'
  | 'AlreadyExists'
  | 'FailedPrecondition'
  | 'ResourceExhausted'
  | 'OutOfRange'
  | 'Aborted'
  | 'Unimplemented'
  | 'Internal';

export class TwinvolError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'TwinvolError';
  }
}

export const invalidArgument = (message: string) => new TwinvolError('InvalidArgument', message);
export const notFound = (message: string) => new TwinvolError('NotFound', message);
export const alreadyExists = (message: string) => new TwinvolError('AlreadyExists', message);
export const failedPrecondition = (message: string) => new TwinvolError('FailedPrecondition', message);
export const resourceExhausted = (message: string) => new TwinvolError('ResourceExhausted', message);
export const outOfRange = (message: string) => new TwinvolError('OutOfRange', message);
export const aborted = (message: string) => new TwinvolError('Aborted', message);
export const unimplemented = (message: string) => new TwinvolError('Unimplemented', message);
export const internal = (message: string) => new TwinvolError('Internal', message);

/** Any thrown value as a TwinvolError; unknown failures become Internal with their message only. */
export function asTwinvolError(err: unknown): TwinvolError {
  if (err instanceof TwinvolError) return err;
  if (err instanceof Error) return internal(err.message);
  return internal(String(err));
}

export function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string'
    ? err.code
    : undefined;
}
