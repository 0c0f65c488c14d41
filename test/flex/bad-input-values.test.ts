// Hostile and malformed FlexVolume calls (targets outside the kubelet root, sizes, option values, the
// config file, secrets): each must answer one clean Failure (exit 1, a message an operator can act on,
// no stack trace, no Node error text) and leave the machine exactly as it was. The world they run in
// is test/flex/helpers/refusal-world.ts.
import { randomBytes, randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { flexOptions, mountOptions } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { mountsUnder } from '../helpers/scratch.js';
import { createVolume, creatingOptions, expectCleanFailure, expectRefused, flex, isLink, makeOutsideDir, MiB, mountedVolume, ok, pod, s, tree, useRefusalWorld } from './helpers/refusal-world.js';

useRefusalWorld();

describe('targets outside the kubelet root', () => {
  const outsideTargets = () => {
    const rel = `kubelet-rel-${randomBytes(4).toString('hex')}`;
    return [
      { path: '/etc/x', fragment: 'is outside', absent: ['/etc/x'] },
      { path: '/tmp/elsewhere', fragment: 'is outside', absent: ['/tmp/elsewhere'] },
      { path: `${rel}/pod`, fragment: 'must be an absolute path', absent: [join('/', rel), join(s.kubeletDir, rel)] },
      { path: 'pods/uid/volumes/x', fragment: 'must be an absolute path', absent: ['/pods'] },
      { path: `${s.kubeletDir}/../escape`, fragment: 'is not a normalised path', absent: [join(s.root, 'escape')] },
      { path: `${s.kubeletDir}/pods/../../escape`, fragment: 'is not a normalised path', absent: [join(s.root, 'escape')] },
      { path: s.kubeletDir, fragment: 'is outside', absent: [] },
      { path: `${s.kubeletDir}/`, fragment: 'is outside', absent: [] },
      { path: s.root, fragment: 'is outside', absent: [] },
    ];
  };

  it('mount and mountdevice refuse them for an existing, attached volume', async () => {
    await createVolume('vol-t', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-t', { volumeId: 'vol-t' });
    await ok('attach', opts, 'node-a');
    const cases = outsideTargets().flatMap((t) => [
      { argv: ['mount', t.path, mountOptions('pv-t', pod('uid-t'), { volumeId: 'vol-t' })], fragment: new RegExp(`^target path .*${t.fragment}`), absent: t.absent },
      { argv: ['mountdevice', t.path, '', opts], fragment: new RegExp(`^staging path .*${t.fragment}`), absent: t.absent },
    ]);
    await expectRefused(...cases);
    expect(existsSync(join(s.stateDir, 'staging'))).toBe(false);
  });

  it('unmount and unmountdevice refuse them and unmount nothing', async () => {
    const held = await mountedVolume();
    const cases = outsideTargets().flatMap((t) => [
      { argv: ['unmount', t.path], fragment: new RegExp(`^target path .*${t.fragment}`), absent: t.absent },
      { argv: ['unmountdevice', t.path], fragment: new RegExp(`^staging path .*${t.fragment}`), absent: t.absent },
    ]);
    await expectRefused(...cases);
    expect(mountAt(held.dir)).toBeDefined();
  });

  it('refuses a symlink inside the kubelet dir that points outside: nothing mounted or written there', async () => {
    const outside = makeOutsideDir();
    writeFileSync(join(outside, 'precious.txt'), 'keep');
    // The outside dir holds a mount of its own that unmount must not touch.
    const outsideMount = join(outside, 'mnt');
    mkdirSync(outsideMount);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', outsideMount]);
    const before = tree(outside);
    await createVolume('vol-l', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-l', { volumeId: 'vol-l' });
    await ok('attach', opts, 'node-a');
    mkdirSync(join(s.kubeletDir, 'pods'), { recursive: true });
    const link = join(s.kubeletDir, 'pods', 'evil');
    symlinkSync(outside, link);
    const linkToMount = join(s.kubeletDir, 'pods', 'evil-mnt');
    symlinkSync(outsideMount, linkToMount);
    const mopts = mountOptions('pv-l', pod('uid-l'), { volumeId: 'vol-l' });
    const below = join(link, 'volumes/acme~twinvol/pv-l');
    await expectRefused(
      { argv: ['mount', link, mopts], fragment: `target path ${link} resolves outside ${s.kubeletDir}` },
      { argv: ['mount', below, mopts], fragment: `target path ${below} resolves outside`, absent: [join(outside, 'volumes')] },
      { argv: ['mountdevice', link, '', opts], fragment: `staging path ${link} resolves outside` },
      { argv: ['mountdevice', below, '', opts], fragment: `staging path ${below} resolves outside`, absent: [join(outside, 'volumes')] },
      { argv: ['unmount', linkToMount], fragment: `target path ${linkToMount} resolves outside` },
      { argv: ['unmountdevice', linkToMount], fragment: `staging path ${linkToMount} resolves outside` },
      { argv: ['unmount', link], fragment: `target path ${link} resolves outside` },
    );
    expect(mountsUnder(outside)).toEqual([outsideMount]);
    expect(tree(outside)).toEqual(before);
    expect(readFileSync(join(outside, 'precious.txt'), 'utf8')).toBe('keep');
    expect(isLink(link) && isLink(linkToMount)).toBe(true);
  });

  // Once a bug: realpath of a dangling link fails with ENOENT, so the check walked up to the link's
  // parent and passed; the volume was staged and attached before mkdir failed, and nothing rolled back.
  it('refuses a dangling symlink pointing outside, and stages nothing', async () => {
    const outside = makeOutsideDir();
    await createVolume('vol-d', '--backend', 'dir', '--size', '1Mi');
    mkdirSync(join(s.kubeletDir, 'pods'), { recursive: true });
    const link = join(s.kubeletDir, 'pods', 'dangling');
    symlinkSync(join(outside, 'not-yet'), link);
    await expectRefused({ argv: ['mount', link, mountOptions('pv-d', pod('uid-d'), { volumeId: 'vol-d' })], fragment: 'passes through a dangling symbolic link', absent: [join(outside, 'not-yet')] });
  });

  // Once a bug: with createIfMissing, mount provisioned the volume before it checked the target.
  it('mount with createIfMissing and a target outside the root creates no volume', async () => {
    await expectRefused({ argv: ['mount', '/etc/x', creatingOptions('made-anyway')], fragment: 'is outside', absent: ['/etc/x'] });
  });
});

describe('sizes', () => {
  const notSizes: [string, string][] = [
    // Kubernetes quantities (1.5Gi, 1e9) are sizes (shared/size.ts); these are not.
    ['-1', 'size "-1" is negative'],
    ['1.5', 'size "1.5" is not a whole number of bytes'],
    ['10XB', 'size "10XB" is not a size (use bytes, a suffix'],
    ['1e-3', 'size "1e-3" is not a whole number of bytes'],
    ['0', 'size "0" must be a positive whole number of bytes'],
    ['99999999999Ti', 'size "99999999999Ti"'],
    ['', 'size "" is not a size'],
    ['12 Gi', 'size "12 Gi" is not a size'],
  ];

  for (const backend of ['block', 'dir']) {
    it(`createIfMissing refuses sizes that are not sizes (${backend})`, async () => {
      const dir = podVolumeDir(s.kubeletDir, 'uid-s', 'pv-s');
      await expectRefused(
        ...notSizes.map(([size, fragment]) => ({ argv: ['mount', dir, creatingOptions('vol-s', { size, backend })], fragment, absent: [dir] })),
        ...notSizes.map(([size, fragment]) => ({ argv: ['attach', creatingOptions('vol-s', { size, backend }), 'node-a'], fragment })),
      );
    });
  }

  // Once a bug: sizes past 2^53 were called not "a positive whole number of bytes" instead of too large.
  it('names the 1 PiB limit for a huge size', async () => {
    await expectRefused({ argv: ['attach', creatingOptions('vol-s', { size: '99999999999Ti' }), 'node-a'], fragment: '1 PiB limit' });
  });

  it('expandvolume and expandfs refuse a newSize that is not a byte count, expandfs one the image has not reached, and leave the image alone', async () => {
    await createVolume('vol-e', '--size', '16Mi');
    const image = join(s.dataRoot, 'volumes/vol-e/image.img');
    const opts = flexOptions('pv-e', { volumeId: 'vol-e' });
    const global = deviceMountPath(s.kubeletDir, 'pv-e');
    await expectRefused(
      { argv: ['expandvolume', opts, 'relative/path', 'abc', String(16 * MiB)], fragment: 'newSize must be a number of bytes' },
      { argv: ['expandvolume', opts, 'relative/path', '-5', String(16 * MiB)], fragment: 'newSize must be a number of bytes' },
      { argv: ['expandvolume', opts, 'relative/path', '64Mi', String(16 * MiB)], fragment: 'newSize must be a number of bytes' },
      { argv: ['expandvolume', opts, 'relative/path', String(64 * MiB), 'abc'], fragment: 'oldSize must be a number of bytes' },
      { argv: ['expandfs', opts, '/dev/loop0', global, 'abc', String(16 * MiB)], fragment: 'newSize must be a number of bytes' },
      { argv: ['expandfs', opts, '/dev/loop0', global, '-5', String(16 * MiB)], fragment: 'newSize must be a number of bytes' },
      // Before expandvolume grew the image: once Success with the old size, as if the filesystem had grown.
      { argv: ['expandfs', opts, '/dev/loop0', global, String(64 * MiB), String(16 * MiB)], fragment: 'its controller expansion grows it first' },
    );
    expect(statSync(image).size).toBe(16 * MiB);
    expect(JSON.parse(readFileSync(join(s.dataRoot, 'volumes/vol-e/volume.json'), 'utf8')).capacityBytes).toBe(16 * MiB);
  });
});

describe('option values', () => {
  it('refuses unknown option keys by name (typos are errors, not silent defaults)', async () => {
    await createVolume('vol-o', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-o', 'pv-o');
    const m = (extra: Record<string, string>) => mountOptions('pv-o', pod('uid-o'), extra);
    await expectRefused(
      { argv: ['mount', dir, m({ volumeID: 'vol-o' })], fragment: 'unknown option "volumeID" (twinvol reads: volumeId,', absent: [dir] },
      { argv: ['mount', dir, m({ volumeId: 'vol-o', createifmissing: 'true' })], fragment: 'unknown option "createifmissing"', absent: [dir] },
      { argv: ['attach', flexOptions('pv-o', { volume_id: 'vol-o' }), 'node-a'], fragment: 'unknown option "volume_id"' },
      { argv: ['getvolumename', flexOptions('pv-o', { volumeId: 'vol-o', Size: '1Gi' })], fragment: 'unknown option "Size"' },
    );
  });

  it('refuses a secret that is not base64 without echoing it', async () => {
    await createVolume('vol-o', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-o', 'pv-o');
    const bad = ['not base64!', 'abc', 'ab=c', 'aGVsbG8=\n'];
    const results = await expectRefused(
      ...bad.map((value) => ({
        argv: ['mount', dir, mountOptions('pv-o', pod('uid-o'), { volumeId: 'vol-o', 'kubernetes.io/secret/password': value })],
        fragment: /^secret "password" is not base64$/,
        absent: [dir],
      })),
    );
    for (const [i, r] of results.entries()) expect(r.output).not.toContain(bad[i]!.trim());
  });

  it('refuses kubernetes.io/readwrite other than ro or rw', async () => {
    await createVolume('vol-o', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-o', 'pv-o');
    await expectRefused(
      ...['yes', 'RW', 'readonly', ''].map((rw) => ({
        argv: ['mount', dir, mountOptions('pv-o', pod('uid-o'), { volumeId: 'vol-o', 'kubernetes.io/readwrite': rw })],
        fragment: 'kubernetes.io/readwrite must be "ro" or "rw"',
        absent: [dir],
      })),
    );
  });

  it('refuses a missing volume without createIfMissing and says how to create it', async () => {
    const dir = podVolumeDir(s.kubeletDir, 'uid-m', 'pv-m');
    const how = 'volume vol-missing does not exist: create it with "twinvol volume create", or set createIfMissing and size';
    await expectRefused(
      { argv: ['mount', dir, mountOptions('pv-m', pod('uid-m'), { volumeId: 'vol-missing' })], fragment: how, absent: [dir] },
      { argv: ['mount', dir, mountOptions('pv-m', pod('uid-m'), { volumeId: 'vol-missing', createIfMissing: 'false', size: '1Mi' })], fragment: how, absent: [dir] },
      { argv: ['attach', flexOptions('pv-m', { volumeId: 'vol-missing' }), 'node-a'], fragment: how },
      { argv: ['waitforattach', '', flexOptions('pv-m', { volumeId: 'vol-missing' })], fragment: how },
    );
  });

  it('refuses an unknown backend with createIfMissing', async () => {
    const dir = podVolumeDir(s.kubeletDir, 'uid-b', 'pv-b');
    await expectRefused(
      { argv: ['mount', dir, creatingOptions('vol-b', { backend: 'nfs' })], fragment: 'backend "nfs" is unknown (use ', absent: [dir] },
      { argv: ['attach', creatingOptions('vol-b', { backend: 'Block' }), 'node-a'], fragment: 'backend "Block" is unknown' },
      { argv: ['attach', creatingOptions('vol-b', { backend: '' }), 'node-a'], fragment: 'backend "" is unknown' },
    );
  });
});

describe('config file', () => {
  const broken: [string, string, string][] = [
    ['not JSON', 'flexAttach: false\n', 'is not valid JSON'],
    ['truncated JSON', '{"flexAttach": fal', 'is not valid JSON'],
    ['an array', '[]', 'must hold a JSON object'],
    ['an unknown key', '{"flexAtach": false}', 'unknown setting "flexAtach"'],
    ['a wrong type', '{"flexAttach": "no"}', 'setting flexAttach must be true or false'],
  ];

  for (const [what, text, fragment] of broken) {
    it(`answers Failure, not a crash, when the config file is ${what}`, async () => {
      writeFileSync(s.env.TWINVOL_CONFIG!, text);
      const dir = podVolumeDir(s.kubeletDir, 'uid-c', 'pv-c');
      const global = deviceMountPath(s.kubeletDir, 'pv-c');
      const opts = creatingOptions('vol-c');
      await expectRefused(
        { argv: ['init'], fragment },
        { argv: ['mount', dir, mountOptions('pv-c', pod('uid-c'), { volumeId: 'vol-c', createIfMissing: 'true', size: '1Mi', backend: 'dir' })], fragment, absent: [dir] },
        { argv: ['attach', opts, 'node-a'], fragment },
        { argv: ['mountdevice', global, '', opts], fragment, absent: [global] },
        { argv: ['unmount', dir], fragment },
        { argv: ['detach', 'pv-c', 'node-a'], fragment },
      );
      expect(existsSync(s.dataRoot)).toBe(false);
    });
  }
});

describe('secrets', () => {
  // Once a leak: a failed mount's message showed mount(8)'s whole argv, `-o size=1m,password=...`
  // included, and kubelet puts that message in the pod's events.
  it("a static volume's secret-looking mount option is cut from a failed mount's reply and log", async () => {
    const marker = `pw-${randomUUID()}`;
    await createVolume('vol-pw', '--backend', 'static', '--source', 'tmpfs', '--fs-type', 'tmpfs', '--mount-options', `size=1m,password=${marker},mode=0700`);
    const opts = flexOptions('pv-pw', { volumeId: 'vol-pw' });
    await ok('attach', opts, 'node-a');
    // tmpfs knows no "password": the mount fails for real, in mount(8), and says so.
    const r = await flex('mountdevice', deviceMountPath(s.kubeletDir, 'pv-pw'), '', opts);
    const message = expectCleanFailure(r, '-o size=1m,password=[redacted],mode=0700 ', 'mountdevice');
    expect(message).toMatch(/^mount .* failed with exit code/);
    expect(r.output).not.toContain(marker);
    expect(readFileSync(join(s.stateDir, 'log/flex.log'), 'utf8')).not.toContain(marker);
    expect(mountsUnder(s.root)).toEqual([]);
    await ok('detach', 'pv-pw', 'node-a');
  });

  it('never appear in replies or the log, on failing and succeeding calls', async () => {
    const marker = `twinvol-secret-${randomUUID()}`;
    const b64 = Buffer.from(marker).toString('base64');
    const secret = { 'kubernetes.io/secret/password': b64, 'kubernetes.io/secret/token': b64 };
    await createVolume('vol-sec', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-sec', 'pv-sec');
    const m = (extra: Record<string, string>) => mountOptions('pv-sec', pod('uid-sec'), { ...secret, ...extra });

    const failed = await expectRefused(
      { argv: ['mount', dir, m({ volumeId: 'vol-missing' })], fragment: 'volume vol-missing does not exist', absent: [dir] },
      { argv: ['mount', '/etc/x', m({ volumeId: 'vol-sec' })], fragment: 'is outside', absent: ['/etc/x'] },
      { argv: ['mount', dir, m({ volumeId: 'vol-sec', volumeID: 'x' })], fragment: 'unknown option "volumeID"', absent: [dir] },
      { argv: ['mount', dir, m({ volumeId: 'vol-sec', 'kubernetes.io/readwrite': b64 })], fragment: 'must be "ro" or "rw"', absent: [dir] },
    );
    const succeeded = await ok('mount', dir, m({ volumeId: 'vol-sec' }));
    expect(mountAt(dir)).toBeDefined();
    // The node record (the pod's mount; a dir volume has no staging) exists only while mounted: scan
    // it now, not only after teardown removed it.
    expect(filesWithoutSecret().filter((p) => p.startsWith(join(s.stateDir, 'mounts'))).length).toBeGreaterThanOrEqual(1);
    const teardown = await ok('unmount', dir);

    const replies = [...failed, succeeded, teardown].map((r) => r.output).join('\n');
    expect(replies).not.toContain(b64);
    expect(replies).not.toContain(marker);

    const log = readFileSync(join(s.stateDir, 'log/flex.log'), 'utf8');
    // The log was written for these calls, so its silence about the secret means something.
    expect(log.split('\n').filter((l) => l.includes('"call":"mount"') && l.includes('"msg":"call"')).length).toBeGreaterThanOrEqual(failed.length + 1);
    expect(log).toContain('"status":"Success"');
    expect(log).toContain('"status":"Failure"');
    expect(log).not.toContain(b64);
    expect(log).not.toContain(marker);

    // Nor in any record twinvol keeps.
    expect(filesWithoutSecret().length).toBeGreaterThanOrEqual(2);

    /** Checks every file under the state dir and data root for the secret; returns the files checked. */
    function filesWithoutSecret(): string[] {
      const checked: string[] = [];
      for (const file of [...tree(s.stateDir).map((p) => join(s.stateDir, p)), ...tree(s.dataRoot).map((p) => join(s.dataRoot, p))]) {
        const path = file.replace(/:(dir|file|link)$/, '');
        if (!file.endsWith(':file')) continue;
        const text = readFileSync(path, 'utf8');
        expect(text, path).not.toContain(b64);
        expect(text, path).not.toContain(marker);
        checked.push(path);
      }
      return checked;
    }
  });
});
