import { invalidArgument, outOfRange } from './errors.js';

/** Largest size we accept: an image of 1 PiB is already absurd, and it keeps arithmetic exact in a double. */
export const MAX_SIZE_BYTES = 2 ** 50;

/** Kubernetes' quantity suffixes (k8s.io/apimachinery resource.Quantity), as powers of 2 and of 10. */
const BINARY: Record<string, bigint> = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DECIMAL: Record<string, number> = { m: -3, '': 0, k: 3, K: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/**
 * <sign?><digits, with a fraction?><suffix>, where the suffix is binary (Ki..Ei), decimal (m, k..E;
 * K too, which twinvol has always taken for k) or an exponent (e9, E-3). Bounded lengths keep the
 * exact arithmetic below small.
 */
const QUANTITY = /^([+-]?)([0-9]{0,30})(?:\.([0-9]{0,30}))?(?:(Ki|Mi|Gi|Ti|Pi|Ei|m|k|K|M|G|T|P|E)|[eE]([+-]?[0-9]{1,3}))?$/;

/**
 * A quantity as an exact fraction of bytes (`n / divisor`), or undefined when the text is no
 * quantity. The one reading of the syntax, for parseSize and quantityBytes; a blank around it is no
 * quantity, as in the API's ParseQuantity.
 */
function quantityOf(input: string): { n: bigint; divisor: bigint } | undefined {
  const m = QUANTITY.exec(input);
  const [, sign = '', whole = '', fraction = '', suffix, exponent] = m ?? [];
  if (!m || whole + fraction === '') return undefined;
  let n = BigInt(whole + fraction);
  if (sign === '-') n = -n;
  const power10 = (exponent === undefined ? (DECIMAL[suffix ?? ''] ?? 0) : Number(exponent)) - fraction.length;
  // Multiply by the binary factor first: it can absorb a fraction ("0.5Ki" is 512 bytes).
  n <<= BINARY[suffix ?? ''] ?? 0n;
  return power10 >= 0 ? { n: n * 10n ** BigInt(power10), divisor: 1n } : { n, divisor: 10n ** BigInt(-power10) };
}

/**
 * Parses a size written as a Kubernetes quantity ("10Gi", "1.5Gi", "500M", "1e9", "100Ki",
 * "1073741824") into bytes. The one parser of sizes for every front end (the CLI's --size, PV
 * options, CSI volume_context, expansion). Computed exactly (integers, no floating point): a value
 * that is not a whole number of bytes ("1.5", "1500m", "0.1Ki"), zero, negative or over the limit is
 * refused rather than rounded. Read as given, as the API's ParseQuantity reads it: `--size ' 1Mi'` (a
 * variable quoted with its blank) is no size, as it would be in the PV an operator writes next.
 */
export function parseSize(input: unknown, what = 'size'): number {
  if (typeof input === 'number') return checkSize(input, what, String(input));
  if (typeof input !== 'string') throw invalidArgument(`${what} must be a string such as "1Gi"`);
  const shown = JSON.stringify(input.slice(0, 40));
  const q = quantityOf(input);
  if (!q) throw invalidArgument(`${what} ${shown} is not a size (use bytes, a suffix Ki Mi Gi Ti Pi or k M G T P, or an exponent: 1.5Gi, 500M, 1e9)`);
  if (q.n < 0n) throw invalidArgument(`${what} ${shown} is negative`);
  if (q.n % q.divisor !== 0n) throw invalidArgument(`${what} ${shown} is not a whole number of bytes`);
  return checkSize(toNumber(q.n / q.divisor), what, input);
}

/**
 * parseSize for a size already written into a Kubernetes object that kubelet hands on as it is (a PV's
 * flexVolume.options, an inline volume's volumeAttributes): a blank around it has always been taken
 * there, and a volume already in use must keep mounting after an upgrade.
 */
export function parseWrittenSize(input: string, what?: string): number {
  return parseSize(input.trim(), what);
}

/**
 * A quantity read from a Kubernetes object (a PV's capacity, a claim's request) in bytes, rounded up
 * as the API's resource.Quantity Value() rounds ("1500m" is 2), with no range of twinvol's own: for
 * comparing sizes the way kube-controller-manager compares them. Undefined when it is no quantity
 * or is negative.
 */
export function quantityBytes(input: string): bigint | undefined {
  const q = quantityOf(input);
  if (!q || q.n < 0n) return undefined;
  return (q.n + q.divisor - 1n) / q.divisor;
}

/** Beyond the limit, any value will do for the check that refuses it; below, it is exact. */
function toNumber(n: bigint): number {
  return n > BigInt(MAX_SIZE_BYTES) ? MAX_SIZE_BYTES + 1 : Number(n);
}

function checkSize(n: number, what: string, shown: string): number {
  if (n > MAX_SIZE_BYTES) throw invalidArgument(`${what} ${JSON.stringify(shown.slice(0, 40))} is larger than the 1 PiB limit`);
  if (!Number.isSafeInteger(n) || n <= 0) throw invalidArgument(`${what} ${JSON.stringify(shown.slice(0, 40))} must be a positive whole number of bytes`);
  return n;
}

export function formatSize(bytes: number): string {
  for (const [unit, factor] of [['Ti', 2 ** 40], ['Gi', 2 ** 30], ['Mi', 2 ** 20], ['Ki', 2 ** 10]] as const) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return `${bytes}`;
}

/**
 * The smallest filesystem each mkfs accepts, with the reason, so a create is refused up front rather
 * than failing deep inside mkfs. Measured on this project's test machines: mkfs.xfs of xfsprogs 6.1
 * refuses anything below 300 MiB (314572800 bytes; its message says "300MB"; 314572799 fails);
 * mkfs.ext4 of e2fsprogs 1.47 needs 104 KiB (103 KiB fails; below 1 MiB it drops the journal).
 */
export const MIN_FILESYSTEM_BYTES: Readonly<Record<string, { bytes: number; why: string }>> = {
  xfs: { bytes: 300 * 2 ** 20, why: 'mkfs.xfs refuses a filesystem smaller than 300 MiB' },
  ext4: { bytes: 104 * 2 ** 10, why: 'mkfs.ext4 cannot lay out a filesystem smaller than 104 KiB' },
};

/** Refuses a size below what `fsType`'s mkfs can format (fs types twinvol does not format pass). */
export function requireFilesystemFits(fsType: string, bytes: number): void {
  const min = MIN_FILESYSTEM_BYTES[fsType];
  if (min && bytes < min.bytes)
    throw invalidArgument(`size ${formatSize(bytes)} is too small for ${fsType}: ${min.why}; ask for at least ${formatSize(min.bytes)}`);
}

/** What a caller asks a size to be: at least `required` bytes, at most `limit`; 0 means not said. */
export interface SizeRange {
  required: number;
  limit: number;
}

/**
 * The one rule for the size a volume gets: `required`, else `fallback` capped by `limit`; rounded up
 * to a whole multiple of `alignment` (the backend's unit, shared/core/backend-traits.ts: a block image
 * is whole MiB), never above `limit`. Used by create and expand in the core
 * (shared/core/volumes.ts) and by CSI's capacity_range (csi/capacity.ts). A range nothing can satisfy
 * is OutOfRange; an inconsistent one is InvalidArgument. 0 only when nothing is asked and there is no
 * fallback.
 */
export function sizeInRange(range: SizeRange, fallback: number, alignment: number): number {
  const { required, limit } = range;
  for (const [what, n] of [['required size', required], ['size limit', limit]] as const) {
    // Past 2^53 a request is still a whole number, and over the limit: OutOfRange below, not this.
    if (!Number.isInteger(n) || n < 0) throw invalidArgument(`${what} ${n} is not a whole number of bytes`);
  }
  if (limit && limit < required) throw invalidArgument(`the size limit ${limit} bytes is below the required ${required} bytes`);
  let bytes = required || (limit ? Math.min(fallback, limit) : fallback);
  bytes = Math.ceil(bytes / alignment) * alignment;
  if (limit && bytes > limit) bytes = Math.floor(limit / alignment) * alignment;
  if (bytes > MAX_SIZE_BYTES) throw outOfRange(`${bytes} bytes is more than twinvol's 1 PiB limit`);
  if (bytes < required || (bytes === 0 && fallback > 0)) throw outOfRange(`no size that is a whole multiple of ${alignment} bytes lies between ${required} and ${limit} bytes`);
  return bytes;
}
