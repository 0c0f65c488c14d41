import { describe, expect, it } from 'vitest';
import { formatSize, MAX_SIZE_BYTES, parseSize, parseWrittenSize, quantityBytes } from '../../shared/size.js';
import { expectThrows } from './expect-error.js';

describe('parseSize', () => {
  it.each([
    ['1', 1],
    ['1073741824', 1073741824],
    ['1Ki', 1024],
    ['64Mi', 64 * 2 ** 20],
    ['10Gi', 10 * 2 ** 30],
    ['2Ti', 2 * 2 ** 40],
    ['1k', 1000],
    ['1K', 1000],
    ['500M', 500_000_000],
    ['3G', 3_000_000_000],
    ['1T', 1_000_000_000_000],
    ['1024Ti', 2 ** 50],
    ['1125T', 1_125_000_000_000_000],
    ['1125899906842624', 2 ** 50],
    // Kubernetes quantities beyond whole numbers: fractions that come to whole bytes, exponents, Pi.
    ['1.5Gi', 1.5 * 2 ** 30],
    ['0.5Ki', 512],
    ['.5Ki', 512],
    ['1.50Gi', 1.5 * 2 ** 30],
    ['1e9', 1e9],
    ['1E3', 1000],
    ['2.5e3', 2500],
    ['1000m', 1],
    ['+1Gi', 2 ** 30],
    ['1Pi', 2 ** 50],
    ['1e15', 1e15],
  ])('parses %j as %d bytes', (input, bytes) => {
    expect(parseSize(input)).toBe(bytes);
  });

  it('is exact at the 1 PiB limit', () => {
    expect(MAX_SIZE_BYTES).toBe(1125899906842624);
  });

  it.each([
    ['0', 'must be a positive whole number'],
    ['0Gi', 'must be a positive whole number'],
    ['1025Ti', 'larger than the 1 PiB limit'],
    ['1125899906842625', 'larger than the 1 PiB limit'],
    ['1126T', 'larger than the 1 PiB limit'],
    ['-1', 'is negative'],
    ['-1.5Gi', 'is negative'],
    ['-0', 'must be a positive whole number'],
    ['1.5', 'is not a whole number of bytes'],
    ['1500m', 'is not a whole number of bytes'],
    ['0.1Ki', 'is not a whole number of bytes'],
    ['1e-3', 'is not a whole number of bytes'],
    ['2Pi', 'larger than the 1 PiB limit'],
    ['1Ei', 'larger than the 1 PiB limit'],
    ['1e999', 'larger than the 1 PiB limit'],
    ['.', 'is not a size'],
    ['e9', 'is not a size'],
    ['10XB', 'is not a size'],
    ['10gi', 'is not a size'],
    ['1 Gi', 'is not a size'],
    ['0x10', 'is not a size'],
    [' ', 'is not a size'],
    // Read as given, as the API's ParseQuantity reads a PV's capacity: `--size " 1Mi"` made a volume.
    [' 1Mi', 'is not a size'],
    ['1Mi ', 'is not a size'],
    ['1Mi\n', 'is not a size'],
    ['', 'is not a size'],
    ['12345678901234567', 'larger than the 1 PiB limit'],
    ['1'.repeat(31), 'is not a size'],
  ])('refuses %j', (input, message) => {
    expectThrows(() => parseSize(input), 'InvalidArgument', message);
  });

  it('names the field in its messages', () => {
    expectThrows(() => parseSize('lots', 'capacity'), 'InvalidArgument', /^capacity "lots" is not a size/);
  });

  it('refuses non-strings other than numbers', () => {
    for (const v of [undefined, null, {}, ['1Gi'], true, 10n])
      expectThrows(() => parseSize(v), 'InvalidArgument', 'size must be a string such as "1Gi"');
  });

  // Numbers are accepted when they are a positive whole byte count within the limit (shared/size.ts
  // handles `typeof input === 'number'` explicitly); anything else numeric is refused.
  it('accepts positive whole numbers and refuses other numbers', () => {
    expect(parseSize(1024)).toBe(1024);
    for (const n of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 50 + 1, 2 ** 53 + 2])
      expectThrows(() => parseSize(n), 'InvalidArgument', /must be a positive whole number|larger than the 1 PiB limit/);
  });
});

describe('parseWrittenSize (a size already in a PV or a pod spec, which kubelet hands on as it is)', () => {
  it('takes a blank around the quantity, as it always has: a volume in use keeps mounting after an upgrade', () => {
    expect(parseWrittenSize(' 10Gi ')).toBe(10 * 2 ** 30);
    expect(parseWrittenSize('1Mi\n', 'option size')).toBe(2 ** 20);
  });

  it('refuses what parseSize refuses', () => {
    expectThrows(() => parseWrittenSize(' -1Mi ', 'option size'), 'InvalidArgument', /^option size "-1Mi" is negative/);
    expectThrows(() => parseWrittenSize(' ', 'option size'), 'InvalidArgument', /^option size "" is not a size/);
  });
});

describe('formatSize', () => {
  it.each([
    [1, '1'],
    [1000, '1000'],
    [1024, '1Ki'],
    [1536, '1536'],
    [64 * 2 ** 20, '64Mi'],
    [1.5 * 2 ** 30, '1536Mi'],
    [10 * 2 ** 30, '10Gi'],
    [2 ** 40, '1Ti'],
    [2 ** 50, '1024Ti'],
    [500_000_000, '500000000'],
    [0, '0'],
  ])('formats %d as %j', (bytes, text) => {
    expect(formatSize(bytes)).toBe(text);
  });

  it('round-trips through parseSize', () => {
    for (const n of [1, 999, 4096, 3 * 2 ** 20 + 1024, 7 * 2 ** 30, 2 ** 50]) expect(parseSize(formatSize(n))).toBe(n);
  });
});

describe('quantityBytes (sizes read from the cluster, compared as kube-controller-manager compares them)', () => {
  it.each([
    ['10Gi', 10n * 2n ** 30n],
    ['1G', 10n ** 9n],
    ['1500m', 2n], // rounded up, as resource.Quantity Value() rounds
    ['0.1Ki', 103n],
    ['0', 0n],
    ['10Pi', 10n * 2n ** 50n], // past parseSize's 1 PiB: an NFS share may say so
    ['1e3', 1000n],
  ])('%j is %d bytes', (text, bytes) => {
    expect(quantityBytes(text)).toBe(bytes);
  });

  it.each(['', 'ten gigs', '1Gi; rm -rf /', '-1Gi', '1GiB', '.', ' 1Gi', '1Gi\n'])('%j is no quantity', (text) => {
    expect(quantityBytes(text)).toBeUndefined();
  });
});
