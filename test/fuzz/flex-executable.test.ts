import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { FLEX_VERBS, isAdminCommand } from '../../flex/verb-names.js';
import { runFlex } from '../helpers/flex-runner.js';
import { createScratch, mountsUnder } from '../helpers/scratch.js';
import { readMounts } from '../../shared/mountinfo.js';

/**
 * The FlexVolume executable under arbitrary argv: whatever kubelet (or anyone who can run it) passes,
 * the answer is one JSON reply with a known status and the matching exit code, never a stack trace,
 * never a secret; and nothing is mounted anywhere new, inside the scratch or out. Short mode: 40
 * calls with a fixed seed (the executable is a process per call); test:long: 1,500 with a fresh seed.
 */
const LONG = process.env.TWINVOL_LONG === '1';
const params = { numRuns: LONG ? 1_500 : 40, ...(LONG ? {} : { seed: 20261125 }) };
const SECRET = 'U0VDUkVULXNlbnRpbmVs';

const s = createScratch('node-a');
afterAll(() => s.cleanup());

const hostile = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom('..', '/', '/etc', '/tmp/../etc/passwd', '\t', '{}', '[]', 'null', '{"volumeId":"../x"}', ''),
  fc.constant(s.kubeletDir).chain((k) => fc.constantFrom(`${k}/pods/a/volumes/x~y/pv`, `${k}/../escape`, `${k}/plugins/x/mounts/pv`)),
);
const options = fc
  .dictionary(
    fc.constantFrom('volumeId', 'size', 'backend', 'createIfMissing', 'source', 'fsType', 'access', 'mountOptions', 'kubernetes.io/pvOrVolumeName', 'kubernetes.io/readwrite', 'kubernetes.io/fsGroup', 'kubernetes.io/secret/key'),
    // The secret's value goes only where secrets go: an id that happens to equal it may be quoted.
    fc.oneof(hostile, fc.constantFrom('true', 'static', 'dir', '16Mi', '/')),
    { maxKeys: 6 },
  )
  .map((o) => JSON.stringify({ ...o, 'kubernetes.io/secret/key': SECRET }));
// The administrator's commands (and any flag) print for a person, not a reply: kubelet never runs them.
const verb = fc.oneof(fc.constantFrom(...FLEX_VERBS), fc.constantFrom('init', 'getmetrics', ''), hostile).filter((v) => !isAdminCommand(v));
const argv = fc.tuple(verb, fc.array(fc.oneof(options, hostile), { maxLength: 5 }));

describe('the FlexVolume executable under arbitrary argv (fast-check)', () => {
  it('answers one clean JSON reply and mounts nothing outside what it manages', { timeout: LONG ? 1_800_000 : 120_000 }, async () => {
    // The outside paths the generator offers (other suites may mount elsewhere while this runs).
    const outside = ['/etc', '/tmp/etc', '/', `${s.root}/escape`];
    const before = outside.map((p) => readMounts().filter((m) => m.mountPoint === p).length);
    await fc.assert(
      fc.asyncProperty(argv, async ([verb, args]) => {
        const r = await runFlex(s.env, [verb, ...args]);
        const label = `${verb} ${JSON.stringify(args).slice(0, 200)}`;
        expect(['Success', 'Failure', 'Not supported'], label).toContain(r.reply.status);
        if (r.reply.status === 'Failure') expect(r.exitCode, label).toBe(1);
        if (r.reply.status === 'Success') expect(r.exitCode, label).toBe(0);
        expect(r.output, label).not.toMatch(/^\s+at |node:internal|\(node:\d+\)/m);
        expect(r.output, label).not.toContain(SECRET);
        // Anything mounted is under the scratch's kubelet dir or state dir, never elsewhere.
        for (const m of mountsUnder(s.root)) expect(m.startsWith(`${s.kubeletDir}/`) || m.startsWith(`${s.stateDir}/`), `${label}: ${m}`).toBe(true);
      }),
      params,
    );
    expect(outside.map((p) => readMounts().filter((m) => m.mountPoint === p).length)).toEqual(before);
  });
});
