import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isObject, type Json, type JsonObject } from '../deploy/load.js';
import { suiteSeed } from '../helpers/seeded-random.js';
import { fixtureObjects, planOf } from './plan-helpers.js';

/**
 * `twinvol migrate plan` on damaged input: the fixtures' objects with fields deleted or replaced by any
 * JSON value, and arbitrary text. Whatever it is given, the plan answers in its own words (one line per
 * message, no stack trace, exit 0, 1 or 2) and never plans a PV it also skips. Short mode: a fixed seed
 * and 25 runs per property; `npm run test:long` 1,000 with a fresh seed; the seed is printed.
 */
const LONG = process.env.TWINVOL_LONG === '1';
// TWINVOL_SEED replays a printed seed.
const SEED = process.env.TWINVOL_SEED ? Number(process.env.TWINVOL_SEED) : suiteSeed();
const params = { numRuns: LONG ? 1_000 : 25, seed: SEED };
// A run parses the fixtures' 40 objects: 1,000 of them take minutes.
const TIMEOUT = LONG ? 900_000 : 120_000;
console.log(`migrate plan fuzz seed: ${SEED} (TWINVOL_LONG=${LONG ? 1 : 0})`);

const OBJECTS: JsonObject[] = [...fixtureObjects('cluster.yaml'), ...fixtureObjects('workloads.yaml')];

/** One damage: which object, a walk of key choices into it, and the new value (undefined deletes). */
const awkward = fc.constantFrom('', ' ', 'a\nb', 'x\u0000y', '../etc', 'acme/twinvol', 'a/b/c', '-', 'Block', '1Gi', 'null', '{}', 'é');
const damage = fc.record({
  object: fc.nat(),
  walk: fc.array(fc.nat(), { minLength: 1, maxLength: 6 }),
  value: fc.option(fc.oneof(fc.jsonValue({ maxDepth: 2 }), awkward, fc.string({ unit: 'binary', maxLength: 12 })), { nil: undefined }),
});

function damaged(objects: readonly JsonObject[], damages: ReadonlyArray<{ object: number; walk: number[]; value: unknown }>): JsonObject[] {
  const out = structuredClone(objects) as JsonObject[];
  for (const d of damages) {
    let node: Json = out[d.object % out.length] as JsonObject;
    for (const [i, choice] of d.walk.entries()) {
      const keys: (string | number)[] = isObject(node) ? Object.keys(node) : Array.isArray(node) ? node.map((_, n) => n) : [];
      if (!keys.length) break;
      const key = keys[choice % keys.length] as string | number;
      const last = i === d.walk.length - 1;
      const container = node as Record<string | number, Json>;
      const next: Json | undefined = container[key];
      if (last || next === null || typeof next !== 'object') {
        if (d.value === undefined) delete container[key];
        else container[key] = d.value as Json;
        break;
      }
      node = next;
    }
  }
  return out;
}

const WORDS = ['planned', 'skipped', 'inline', 'note'];

function expectOwnWords(r: ReturnType<typeof planOf>): void {
  expect([0, 1, 2]).toContain(r.exitCode);
  expect(r.stderr).not.toMatch(/\n\s+at \S+|Error:|TypeError|undefined|\[object Object\]/);
  const lines = r.stderr.split('\n').filter(Boolean);
  for (const line of lines) {
    const ok = WORDS.some((w) => line.startsWith(`${w}: `)) || line.startsWith('twinvol migrate plan: ') || line.startsWith('nothing to move');
    expect(ok, line).toBe(true);
  }
  if (r.exitCode === 2) {
    expect(r.stdout).toBe('');
    expect(lines).toHaveLength(1);
  }
  // A PV is planned or skipped, never both; each planned one is on stdout.
  const planned = lines.filter((l) => l.startsWith('planned: ')).map((l) => l.slice('planned: '.length, l.indexOf(' (')));
  const skipped = lines.filter((l) => l.startsWith('skipped: PersistentVolume/')).map((l) => l.slice('skipped: '.length, l.indexOf(': ', 'skipped: '.length)));
  expect(planned.filter((p) => skipped.includes(p))).toEqual([]);
  const onStdout = r.docs.filter((d) => d.kind === 'PersistentVolume').map((d) => `PersistentVolume/${String((d.metadata as JsonObject).name)}`);
  expect(onStdout).toEqual(planned);
}

describe('migrate plan on damaged objects', () => {
  it('answers every damage in its own words', () => {
    fc.assert(
      fc.property(fc.array(damage, { minLength: 1, maxLength: 4 }), fc.constantFrom<'exec' | 'vendor'>('exec', 'vendor'), (damages, prefer) => {
        const input = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: damaged(OBJECTS, damages) });
        expectOwnWords(planOf({ files: ['-'], prefer }, input));
      }),
      params,
    );
  }, TIMEOUT);

  it('answers any text in its own words', () => {
    const text = fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 200 }), fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)));
    fc.assert(
      fc.property(text, (t) => {
        const r = planOf({ files: ['-'] }, t);
        expectOwnWords(r);
        // Nothing in it is a PersistentVolume (or it is not even objects): always a usage error.
        expect(r.exitCode).toBe(2);
      }),
      params,
    );
  }, TIMEOUT);
});
