import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoNow } from '../../shared/iso-time.js';

// isoNow must write exactly what toISOString writes: log lines and records written before it
// (shared/log.ts, shared/core/core.ts) are read back and compared by their string.
describe('isoNow', () => {
  it('writes what toISOString writes, for every time a Date can hold', () => {
    fc.assert(
      fc.property(fc.integer({ min: -8.64e15, max: 8.64e15 }), (ms) => {
        expect(isoNow(ms)).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 5000 },
    );
  });

  it.each([0, -1, 253402300799999, 253402300800000, -62167219200000, -62167219200001, 951782400000, 1795816684005])('agrees at the edges: %d', (ms) => {
    expect(isoNow(ms)).toBe(new Date(ms).toISOString());
  });

  it('stamps the present', () => {
    const before = Date.now();
    const stamp = Date.parse(isoNow());
    expect(stamp).toBeGreaterThanOrEqual(before);
    expect(stamp).toBeLessThanOrEqual(Date.now());
  });

  it('refuses a time no Date holds, as toISOString does', () => {
    expect(() => isoNow(8.64e15 + 1)).toThrow(RangeError);
    expect(() => isoNow(Number.NaN)).toThrow(RangeError);
  });
});
