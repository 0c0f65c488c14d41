// shared/sha256.ts replaced node:crypto for the names of records: a different digest would lose every
// record an earlier build named, so the two must agree on any string, not only on ASCII.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../shared/sha256.js';

describe('sha256Hex', () => {
  it('is node:crypto’s hex sha256 of the UTF-8 bytes, for any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (text) => {
        expect(sha256Hex(text)).toBe(createHash('sha256').update(text, 'utf8').digest('hex'));
      }),
      { numRuns: 500 },
    );
  });

  it('gives the standard test vectors (FIPS 180-2)', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
