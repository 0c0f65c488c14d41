// Hostile and malformed FlexVolume calls (malformed options JSON, missing and extra arguments, volume
// ids, PV and node names): each must answer one clean Failure (exit 1, a message an operator can act
// on, no stack trace, no Node error text) and leave the machine exactly as it was. The world they run
// in is test/flex/helpers/refusal-world.ts.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { FLEX_VERBS } from '../../flex/verb-names.js';
import { flexOptions } from '../helpers/flex-runner.js';
import { goJson } from '../helpers/go-json.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { argvFor, ARITY, createVolume, creatingOptions, escapeRegExp, expectRefused, JSON_VERBS, mountedVolume, s, useRefusalWorld, world } from './helpers/refusal-world.js';

useRefusalWorld();

describe('malformed options JSON', () => {
  const malformed: [string, string][] = [
    ['{', 'the options argument is not valid JSON'],
    ['[]', 'options must be a JSON object'],
    ['"str"', 'options must be a JSON object'],
    ['null', 'options must be a JSON object'],
    ['{"volumeId": 5}', 'options: value of "volumeId" must be a string'],
  ];

  for (const verb of JSON_VERBS) {
    it(`${verb} refuses every malformed options argument`, async () => {
      const paths = { global: deviceMountPath(s.kubeletDir, 'pv-new'), dir: podVolumeDir(s.kubeletDir, 'uid-new', 'pv-new'), pv: 'pv-new' };
      await expectRefused(...malformed.map(([json, fragment]) => ({ argv: argvFor(verb, json, paths), fragment, absent: [paths.global, paths.dir] })));
    });
  }

  it('covers every verb that takes options', () => {
    expect([...JSON_VERBS].sort()).toEqual(['attach', 'expandfs', 'expandvolume', 'getvolumename', 'isattached', 'mount', 'mountdevice', 'waitforattach']);
    expect(Object.keys(ARITY).sort()).toEqual([...FLEX_VERBS].sort());
  });
});

describe('missing and extra arguments', () => {
  for (const verb of FLEX_VERBS) {
    const arity = ARITY[verb];
    it(`${verb} (arity ${arity}) refuses no arguments, one too few and one too many`, async () => {
      // Live state for the path-only verbs to (not) tear down; fresh paths for the ones that would create.
      const held = await mountedVolume();
      const fresh = { global: deviceMountPath(s.kubeletDir, 'pv-fresh-vol'), dir: podVolumeDir(s.kubeletDir, 'uid-fresh', 'pv-fresh-vol') };
      const teardown = verb === 'unmount' || verb === 'unmountdevice' || verb === 'detach';
      const paths = teardown ? { global: held.global, dir: held.dir, pv: held.pv } : { ...fresh, pv: 'pv-fresh-vol' };
      const full = argvFor(verb, creatingOptions(), paths);
      expect(full.length - 1).toBe(arity);
      const takes = `${verb} takes ${arity} argument${arity === 1 ? '' : 's'}`;
      await expectRefused(
        { argv: [verb], fragment: `${takes} (${verb} `, absent: [fresh.global, fresh.dir] },
        { argv: full.slice(0, -1), fragment: new RegExp(`^${takes} \\(${verb} [^)]*\\), got ${arity - 1}$`), absent: [fresh.global, fresh.dir] },
        { argv: [...full, 'extra'], fragment: new RegExp(`^${takes} \\(${verb} [^)]*\\), got ${arity + 1}$`), absent: [fresh.global, fresh.dir] },
      );
      // The held volume is untouched: still attached, staged and mounted.
      expect(mountAt(held.global)).toBeDefined();
      expect(mountAt(held.dir)).toBeDefined();
    });
  }
});

describe('volume ids', () => {
  const hostile: [string, string, string][] = [
    ['dots', 'a..b', 'must not contain ".." or "/"'],
    ['parent', '..', 'must not contain ".." or "/"'],
    ['traversal', '../../escape', 'must not contain ".." or "/"'],
    ['slash', 'a/b', 'must not contain ".." or "/"'],
    ['absolute', '/etc', 'must not contain ".." or "/"'],
    ['NUL', 'vol\u0000x', 'contains a NUL byte'],
    ['129 bytes', 'v'.repeat(129), 'is longer than 128 bytes'],
    ['multibyte over 128 bytes', 'é'.repeat(65), 'is longer than 128 bytes'],
    ['leading dash', '-rf', 'may only hold letters, digits'],
    ['leading dash long', '--force', 'may only hold letters, digits'],
    ['space', 'has space', 'may only hold letters, digits'],
    ['leading space', ' vol', 'may only hold letters, digits'],
  ];

  for (const [name, id, fragment] of hostile) {
    it(`refuses a volume id with ${name} in every verb that names a volume`, async () => {
      const json = creatingOptions(id);
      // JSON carries the NUL as an escape; argv itself cannot hold one.
      expect(json).not.toContain('\u0000');
      const dir = podVolumeDir(s.kubeletDir, 'uid-h', 'pv-h');
      const global = deviceMountPath(s.kubeletDir, 'pv-h');
      const absent = [dir, global, join(s.root, 'escape'), join(s.dataRoot, 'escape'), join(s.dataRoot, 'a')];
      const paths = { global, dir, pv: 'pv-h' };
      await expectRefused(
        ...(['mount', 'attach', 'getvolumename', 'waitforattach', 'mountdevice', 'expandvolume', 'expandfs'] as const).map((verb) => ({
          argv: argvFor(verb, json, paths),
          fragment: new RegExp(`^option volumeId .*${escapeRegExp(fragment)}`),
          absent,
        })),
      );
    });
  }

  it('refuses a hostile id that arrives as the PV name (no volumeId option)', async () => {
    const dir = podVolumeDir(s.kubeletDir, 'uid-h', 'pv-h');
    await expectRefused(
      { argv: ['mount', dir, goJson({ 'kubernetes.io/pvOrVolumeName': '../../escape', createIfMissing: 'true', size: '1Mi', backend: 'dir' })], fragment: 'kubernetes.io/pvOrVolumeName "../../escape" must not contain', absent: [dir, join(s.root, 'escape')] },
      // A legal 200-character PV name is not a legal volume id: refused, never truncated into one.
      { argv: ['mount', dir, goJson({ 'kubernetes.io/pvOrVolumeName': 'p'.repeat(200), createIfMissing: 'true', size: '1Mi', backend: 'dir' })], fragment: 'volume id is longer than 128 bytes', absent: [dir] },
    );
  });
});

describe('PV and node names', () => {
  it('attach and isattached refuse hostile node names and PV names', async () => {
    await createVolume('vol-n', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-n', { volumeId: 'vol-n' });
    const escapes = [join(s.dataRoot, 'x.json'), join(s.root, 'x.json'), join(s.dataRoot, 'pvs')];
    await expectRefused(
      { argv: ['attach', opts, '../x'], fragment: 'node name "../x" must not contain ".." or "/"', absent: escapes },
      { argv: ['attach', opts, 'n'.repeat(300)], fragment: 'node name is longer than 253 bytes', absent: escapes },
      { argv: ['attach', opts, ''], fragment: 'node name is required', absent: escapes },
      { argv: ['attach', opts, '-n'], fragment: 'node name "-n" may only hold', absent: escapes },
      { argv: ['isattached', opts, '../x'], fragment: 'node name "../x" must not contain', absent: escapes },
      { argv: ['isattached', opts, 'n'.repeat(300)], fragment: 'node name is longer than 253 bytes', absent: escapes },
      { argv: ['attach', flexOptions('../x', { volumeId: 'vol-n' }), 'node-a'], fragment: 'kubernetes.io/pvOrVolumeName "../x" must not contain', absent: escapes },
      { argv: ['attach', flexOptions('p'.repeat(300), { volumeId: 'vol-n' }), 'node-a'], fragment: 'kubernetes.io/pvOrVolumeName is longer than 253 bytes', absent: escapes },
    );
  });

  it('detach refuses hostile PV and node names and leaves the attachment alone', async () => {
    const held = await mountedVolume();
    await expectRefused(
      { argv: ['detach', '../x', 'node-a'], fragment: 'PV name "../x" must not contain ".." or "/"' },
      { argv: ['detach', '../pvs/pv-held', 'node-a'], fragment: 'PV name "../pvs/pv-held" must not contain' },
      { argv: ['detach', 'p'.repeat(300), 'node-a'], fragment: 'PV name is longer than 253 bytes' },
      { argv: ['detach', held.pv, '../x'], fragment: 'node name "../x" must not contain' },
      { argv: ['detach', held.pv, 'n'.repeat(300)], fragment: 'node name is longer than 253 bytes' },
      { argv: ['detach', '', 'node-a'], fragment: 'PV name is required' },
    );
    expect(world().attachments).toEqual({ held: ['node-a'] });
  });
});
