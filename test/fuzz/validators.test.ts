import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseCapability } from '../../csi/capabilities.js';
import { parseOptions } from '../../flex/options.js';
import { TwinvolError } from '../../shared/errors.js';
import { idForName, validateName } from '../../shared/names.js';
import { MAX_SIZE_BYTES, parseSize } from '../../shared/size.js';
import { checkBounds, isValidId, REQUEST_LIMITS, validatePathUnder, validateVolumeId } from '../../shared/validate.js';

/**
 * Property tests of the parsers every hostile input meets first, in process (no mounts: the end-to-end
 * refusals are in test/flex/bad-input-*.test.ts and test/csi/audit-requests.test.ts). fast-check rather
 * than hand-written generators: it shrinks a failure to its smallest case and replays it from the seed.
 * Short mode: a fixed seed and a few hundred runs per property; `npm run test:long` runs 50 times more
 * with a fresh seed, printed on failure.
 */
const LONG = process.env.TWINVOL_LONG === '1';
const params = { numRuns: LONG ? 15_000 : 300, ...(LONG ? {} : { seed: 20261125 }) };

/** Strings a hostile caller would try: traversal, NUL, separators, look-alikes, long runs, any Unicode. */
const hostile = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 80 }),
  fc.constantFrom('..', '../', '/..', 'a/../b', '/', '\0', 'x\0y', '．．', '%2e%2e', 'a//b', '/tmp/../etc', ' ', '\n', 'ⅹ', 'ａ'),
  fc.array(fc.constantFrom('..', '.', 'a', '/', '\0', 'é', '-', '_'), { maxLength: 40 }).map((p) => p.join('')),
  fc.string({ minLength: 120, maxLength: 300 }),
);

/** The only way a parser may fail: InvalidArgument or OutOfRange, one line, no stack, naming `what`. */
function expectRefusal(err: unknown, what: string): void {
  expect(err).toBeInstanceOf(TwinvolError);
  const e = err as TwinvolError;
  expect(['InvalidArgument', 'OutOfRange']).toContain(e.code);
  expect(e.message).not.toMatch(/\n|\bat \S+:\d+/);
  if (what) expect(e.message).toContain(what);
}

function outcomeOf<T>(fn: () => T): { ok: true; value: T } | { ok: false; err: unknown } {
  try {
    return { ok: true, value: fn() };
  } catch (err) {
    return { ok: false, err };
  }
}

describe('parsers of hostile input (fast-check)', () => {
  it('validatePathUnder: an accepted path lies strictly below the root, normalised, without NUL', () => {
    fc.assert(
      fc.property(fc.oneof(hostile, hostile.map((h) => `/kubelet/${h}`), hostile.map((h) => `/kubelet/pods/${h}/volumes`)), (input) => {
        const r = outcomeOf(() => validatePathUnder(input, '/kubelet', 'target path'));
        if (!r.ok) return expectRefusal(r.err, 'target path');
        expect(r.value.startsWith('/kubelet/')).toBe(true);
        expect(r.value.split('/')).not.toContain('..');
        expect(r.value).not.toContain('\0');
      }),
      params,
    );
  });

  it('volume ids: an accepted id is a safe file name; a refusal names the field', () => {
    fc.assert(
      fc.property(hostile, (input) => {
        const r = outcomeOf(() => validateVolumeId(input, 'volume_id'));
        if (!r.ok) return expectRefusal(r.err, 'volume_id');
        expect(r.value).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*$/);
        expect(r.value).not.toContain('..');
        expect(Buffer.byteLength(r.value)).toBeLessThanOrEqual(128);
      }),
      params,
    );
  });

  it('names: every name the spec allows stands for one valid id, the same each time, and no two names share one', () => {
    fc.assert(
      fc.property(hostile, hostile, (a, b) => {
        const ra = outcomeOf(() => validateName(a, 'name'));
        if (!ra.ok) return expectRefusal(ra.err, 'name');
        const id = idForName(a);
        expect(isValidId(id)).toBe(true);
        expect(idForName(a)).toBe(id);
        if (a !== b && outcomeOf(() => validateName(b, 'name')).ok) expect(idForName(b)).not.toBe(id);
      }),
      params,
    );
  });

  it('sizes: a whole number of bytes within the limit, or a refusal naming the field', () => {
    fc.assert(
      fc.property(fc.oneof(hostile, fc.stringMatching(/^[0-9]{1,20}(k|K|M|G|T|Ki|Mi|Gi|Ti|Pi|x)?$/)), (input) => {
        const r = outcomeOf(() => parseSize(input, 'size'));
        if (!r.ok) return expectRefusal(r.err, 'size');
        expect(Number.isSafeInteger(r.value)).toBe(true);
        expect(r.value).toBeGreaterThanOrEqual(0);
        expect(r.value).toBeLessThanOrEqual(MAX_SIZE_BYTES);
      }),
      params,
    );
  });

  it('FlexVolume options: parsed or refused, and a secret value never appears in a refusal', () => {
    const key = fc.oneof(
      fc.constantFrom('volumeId', 'size', 'backend', 'fsType', 'readOnly', 'createIfMissing', 'access', 'source', 'mountOptions'),
      fc.constantFrom('kubernetes.io/fsType', 'kubernetes.io/readwrite', 'kubernetes.io/fsGroup', 'kubernetes.io/pvOrVolumeName', 'kubernetes.io/secret/password', '__proto__', 'constructor'),
      hostile,
    );
    const value = fc.oneof(hostile, fc.constant('c2VjcmV0LXNlbnRpbmVs'), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 }));
    const options = fc.dictionary(key, value, { maxKeys: 8 }).map((o) => ({ ...o, 'kubernetes.io/secret/token': 'SECRET-sentinel-not-base64!' }));
    fc.assert(
      fc.property(fc.oneof(options.map((o) => JSON.stringify(o)), hostile), (json) => {
        const r = outcomeOf(() => parseOptions(json));
        if (r.ok) return;
        expectRefusal(r.err, '');
        expect((r.err as Error).message).not.toContain('SECRET-sentinel');
        expect((r.err as Error).message).not.toContain('c2VjcmV0LXNlbnRpbmVs');
      }),
      params,
    );
  });

  it('CSI capabilities: any object is parsed or refused by name, never a crash', () => {
    const anything = fc.anything({ maxDepth: 3, withNullPrototype: true });
    const capLike = fc.record(
      { mount: fc.oneof(fc.constant(null), fc.record({ fs_type: hostile, mount_flags: fc.array(hostile, { maxLength: 3 }), volume_mount_group: hostile })), block: fc.oneof(fc.constant(null), fc.constant({})), access_mode: fc.oneof(fc.constant(null), fc.record({ mode: fc.oneof(hostile, fc.constantFrom('SINGLE_NODE_WRITER', 'MULTI_NODE_MULTI_WRITER', 'UNKNOWN')) })), access_type: fc.constantFrom('mount', 'block', undefined, 'x') },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.oneof(anything, capLike), (cap) => {
        // The generated input is whatever a decoder could hand over, and worse: that is the point.
        const r = outcomeOf(() => parseCapability(cap as Parameters<typeof parseCapability>[0]));
        if (!r.ok) expectRefusal(r.err, 'volume_capability');
      }),
      params,
    );
  });

  it('request bounds: within REQUEST_LIMITS or refused naming the field', () => {
    const big = fc.integer({ min: 0, max: 2 * REQUEST_LIMITS.stringBytes }).map((n) => 'x'.repeat(n));
    const map = fc.dictionary(fc.string({ maxLength: 20 }), fc.oneof(big, hostile), { maxKeys: 300 });
    fc.assert(
      fc.property(fc.record({ volume_id: hostile, volume_context: map, secrets: map }), (req) => {
        const r = outcomeOf(() => checkBounds(req, ''));
        if (!r.ok) return expectRefusal(r.err, '');
        for (const m of [req.volume_context, req.secrets]) {
          expect(Object.keys(m).length).toBeLessThanOrEqual(REQUEST_LIMITS.mapKeys);
          for (const v of Object.values(m)) expect(Buffer.byteLength(v)).toBeLessThanOrEqual(REQUEST_LIMITS.stringBytes);
        }
      }),
      { ...params, numRuns: LONG ? 2_000 : 60 },
    );
  });
});
