import { invalidArgument, MAX_SIZE_BYTES, outOfRange } from '../shared/index.js';
import type { CapacityRange } from './csi-types.js';

/** Conformance suites assume it, and a sparse image makes it free until written. */
export const DEFAULT_SIZE_BYTES = 10 * 2 ** 30;

function int64(value: string, what: string): number {
  if (!/^-?[0-9]{1,19}$/.test(value)) throw invalidArgument(`${what} is not an integer`);
  const n = Number(value);
  if (n < 0) throw invalidArgument(`${what} must not be negative`);
  return n;
}

/**
 * The size a capacity range asks for: required_bytes, else the default capped by limit_bytes; rounded
 * up to a whole multiple of `alignment` (the backend's, shared/core/backend-traits.ts), never above
 * limit_bytes. A range nothing can satisfy is
 * OUT_OF_RANGE; an inconsistent one is INVALID_ARGUMENT.
 */
export function sizeFromRange(range: CapacityRange | null | undefined, fallback: number, alignment: number): number {
  const required = range ? int64(range.required_bytes, 'capacity_range.required_bytes') : 0;
  const limit = range ? int64(range.limit_bytes, 'capacity_range.limit_bytes') : 0;
  if (limit && limit < required) throw invalidArgument(`capacity_range.limit_bytes ${limit} is below required_bytes ${required}`);
  let bytes = required || (limit ? Math.min(fallback, limit) : fallback);
  bytes = Math.ceil(bytes / alignment) * alignment;
  if (limit && bytes > limit) bytes = Math.floor(limit / alignment) * alignment;
  if (bytes > MAX_SIZE_BYTES) throw outOfRange(`${bytes} bytes is more than twinvol's 1 PiB limit`);
  if (bytes < required || (bytes === 0 && fallback > 0)) throw outOfRange(`no size that is a whole multiple of ${alignment} bytes lies between ${required} and ${limit} bytes`);
  return bytes;
}
