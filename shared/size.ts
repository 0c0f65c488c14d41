import { invalidArgument } from './errors.js';

const UNITS: Record<string, number> = {
  '': 1,
  k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40,
};

/** Largest size we accept: an image of 1 PiB is already absurd, and it keeps arithmetic exact in a double. */
export const MAX_SIZE_BYTES = 2 ** 50;

/**
 * Parses a size as Kubernetes quantities write it ("10Gi", "500M", "1073741824"). Only whole numbers:
 * a fraction of a byte, a sign, an exponent or trailing text is refused rather than guessed at.
 */
export function parseSize(input: unknown, what = 'size'): number {
  if (typeof input === 'number') return checkSize(input, what, String(input));
  if (typeof input !== 'string') throw invalidArgument(`${what} must be a string such as "1Gi"`);
  const m = /^([0-9]{1,16})(k|K|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(input.trim());
  if (!m) throw invalidArgument(`${what} ${JSON.stringify(input.slice(0, 40))} is not a size (use bytes or a suffix: Ki Mi Gi Ti k M G T)`);
  const unit = UNITS[m[2] ?? ''] ?? 1;
  return checkSize(Number(m[1]) * unit, what, input);
}

function checkSize(n: number, what: string, shown: string): number {
  if (n > MAX_SIZE_BYTES) throw invalidArgument(`${what} ${JSON.stringify(shown)} is larger than the 1 PiB limit`);
  if (!Number.isSafeInteger(n) || n <= 0) throw invalidArgument(`${what} ${JSON.stringify(shown)} must be a positive whole number of bytes`);
  return n;
}

export function formatSize(bytes: number): string {
  for (const [unit, factor] of [['Ti', 2 ** 40], ['Gi', 2 ** 30], ['Mi', 2 ** 20], ['Ki', 2 ** 10]] as const) {
    if (bytes >= factor && bytes % factor === 0) return `${bytes / factor}${unit}`;
  }
  return `${bytes}`;
}
