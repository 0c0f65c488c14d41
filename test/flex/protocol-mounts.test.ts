// FlexVolume protocol rules, as kubelet's pkg/volume/flexvolume applies them, that the other flex
// suites leave open: the dirs kubelet makes, never stacking a mount, Go-encoded options, reconstructed
// options, fsGroup, read-only. The world they run in is test/flex/helpers/kubelet-world.ts.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { flexOptions, mountOptions, reconstructedOptions } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { loopsLeftUnder, mountsUnder } from '../helpers/scratch.js';
import { attachAndMount, attachmentsOf, call, createVolume, kubeletMkdir, mountCount, nonAttachable, pod, refused, replyOf, s, succeed, useConfig, useKubeletWorld } from './helpers/kubelet-world.js';

useKubeletWorld();

describe('the dirs kubelet makes and removes', () => {
  for (const backend of ['dir', 'block'] as const) {
    it(`accepts the empty 0750 dirs kubelet makes before mountdevice and mount (${backend})`, async () => {
      await createVolume('vol-k', '--backend', backend, '--size', '16Mi');
      const opts = flexOptions('pv-k', { volumeId: 'vol-k' });
      const global = deviceMountPath(s.kubeletDir, 'pv-k');
      const dir = podVolumeDir(s.kubeletDir, 'uid-k', 'pv-k');
      kubeletMkdir(global);
      kubeletMkdir(dir);
      await succeed(['attach', opts, 'node-a']);
      const wait = await succeed(['waitforattach', '', opts]);
      await succeed(['mountdevice', global, String(wait.device), opts]);
      await succeed(['mount', dir, mountOptions('pv-k', pod('uid-k'))]);
      expect(mountCount(global)).toBe(1);
      expect(mountCount(dir)).toBe(1);
      writeFileSync(join(dir, 'f'), 'through the pod');
      expect(readFileSync(join(global, 'f'), 'utf8')).toBe('through the pod');
      await succeed(['unmount', dir]);
      await succeed(['unmountdevice', global]);
      await succeed(['detach', 'pv-k', 'node-a']);
      expect(mountsUnder(s.root)).toEqual([]);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
    });
  }

  it('creates missing dirs, parents included, for mountdevice and mount (attachable and not)', async () => {
    await createVolume('vol-m', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-m', { volumeId: 'vol-m' });
    const m = await attachAndMount('pv-m', opts, 'uid-m');
    expect(mountAt(m.global)).toBeDefined();
    expect(mountAt(m.dir)).toBeDefined();
    nonAttachable();
    await createVolume('vol-n', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-n', 'pv-n');
    expect(existsSync(join(s.kubeletDir, 'pods', 'uid-n'))).toBe(false);
    await succeed(['mount', dir, mountOptions('pv-n', pod('uid-n'), { volumeId: 'vol-n' })]);
    expect(mountAt(dir)).toBeDefined();
  });

  it('unmount and unmountdevice answer Success for dirs never mounted: made by kubelet, or absent', async () => {
    const made = { dir: podVolumeDir(s.kubeletDir, 'uid-e', 'pv-e'), global: deviceMountPath(s.kubeletDir, 'pv-e') };
    kubeletMkdir(made.dir);
    kubeletMkdir(made.global);
    const absent = { dir: podVolumeDir(s.kubeletDir, 'uid-a', 'pv-a'), global: deviceMountPath(s.kubeletDir, 'pv-a') };
    for (let i = 0; i < 2; i++) {
      for (const p of [made, absent]) {
        expect(await succeed(['unmount', p.dir])).toEqual({ status: 'Success' });
        expect(await succeed(['unmountdevice', p.global])).toEqual({ status: 'Success' });
      }
    }
    expect(existsSync(absent.dir) || existsSync(absent.global)).toBe(false);
    expect(mountsUnder(s.root)).toEqual([]);
  });
});

describe('never stacks a mount', () => {
  /** A bind mount from the same filesystem: st_dev of `path` equals its parent's, so only mountinfo sees it. */
  function foreignBind(path: string): string {
    const theirs = join(s.root, `theirs-${randomBytes(3).toString('hex')}`);
    mkdirSync(theirs);
    writeFileSync(join(theirs, 'theirs.txt'), 'not twinvol');
    kubeletMkdir(path);
    execFileSync('mount', ['--bind', theirs, path]);
    expect(statSync(path).dev).toBe(statSync(dirname(path)).dev);
    expect(mountCount(path)).toBe(1);
    return theirs;
  }

  it('refuses a global dir or pod dir that holds a same-filesystem bind mount, and leaves it alone', async () => {
    await createVolume('vol-s', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-s', { volumeId: 'vol-s' });
    await succeed(['attach', opts, 'node-a']);
    const global = deviceMountPath(s.kubeletDir, 'pv-s');
    foreignBind(global);
    await refused(['mountdevice', global, '', opts], `${global} already holds a mount twinvol did not make`);
    expect(mountCount(global)).toBe(1);
    expect(readFileSync(join(global, 'theirs.txt'), 'utf8')).toBe('not twinvol');

    // Staged at another path, the pod dir is the one held.
    const other = deviceMountPath(s.kubeletDir, 'pv-s2');
    await succeed(['mountdevice', other, '', opts]);
    const dir = podVolumeDir(s.kubeletDir, 'uid-s', 'pv-s');
    foreignBind(dir);
    await refused(['mount', dir, mountOptions('pv-s', pod('uid-s'))], `${dir} already holds a mount twinvol did not make`);
    expect(mountCount(dir)).toBe(1);
    expect(readdirSync(dir)).toEqual(['theirs.txt']);
  });

  it('non-attachable: refuses a pod dir held by a same-filesystem bind mount, staging nothing', async () => {
    nonAttachable();
    await createVolume('vol-s', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-s', 'pv-s');
    foreignBind(dir);
    await refused(['mount', dir, mountOptions('pv-s', pod('uid-s'), { volumeId: 'vol-s' })], 'already holds a mount twinvol did not make');
    expect(mountCount(dir)).toBe(1);
    expect(mountsUnder(s.root)).toEqual([dir]);
    expect(attachmentsOf('vol-s')).toEqual([]);
  });

  it('does not stack on its own mount when its record is gone (state dir lost, mount kept)', async () => {
    await createVolume('vol-o', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-o', { volumeId: 'vol-o' });
    await succeed(['attach', opts, 'node-a']);
    const global = deviceMountPath(s.kubeletDir, 'pv-o');
    await succeed(['mountdevice', global, '', opts]);
    rmSync(join(s.stateDir, 'mounts'), { recursive: true, force: true });
    const c = await call(['mountdevice', global, '', opts]);
    replyOf(c);
    expect(mountCount(global)).toBe(1);
  });
});

describe('options as kubelet\'s Go encoder writes them', () => {
  it('a PV option value with <, > and & arrives as \\u003c, \\u003e, \\u0026 and is used exactly (static source)', async () => {
    const source = join(s.root, 'src<a>&b');
    mkdirSync(source);
    writeFileSync(join(source, 'inside.txt'), 'found through an escaped path');
    await createVolume('vol-enc', '--backend', 'static', '--source', source, '--fs-type', 'none', '--mount-options', 'bind');
    // The PV repeats the source: twinvol compares it with the catalog's, so a wrong decoding is a Failure.
    const opts = flexOptions('pv-enc', { volumeId: 'vol-enc', source });
    expect(opts).toContain('src\\u003ca\\u003e\\u0026b');
    expect(opts).not.toMatch(/[<>&]/);
    const m = await attachAndMount('pv-enc', opts, 'uid-enc', { volumeId: 'vol-enc', source });
    expect(readFileSync(join(m.dir, 'inside.txt'), 'utf8')).toBe('found through an escaped path');
    expect(readFileSync(join(m.global, 'inside.txt'), 'utf8')).toBe('found through an escaped path');
    // A different source is refused, so the comparison above did happen.
    await refused(['getvolumename', flexOptions('pv-enc', { volumeId: 'vol-enc', source: `${source}x` })], 'option "source" does not match volume vol-enc');
  });

  it('createIfMissing records the decoded value, not the escape', async () => {
    // A host path chosen in a PV is allowed only under a root the administrator listed.
    useConfig({ flexAttach: false, staticSourceRoots: [s.root] });
    const source = join(s.root, 'made<&>here');
    mkdirSync(source);
    const dir = podVolumeDir(s.kubeletDir, 'uid-c', 'pv-c');
    await succeed(['mount', dir, mountOptions('pv-c', pod('uid-c'), { volumeId: 'vol-c', createIfMissing: 'true', backend: 'static', source, fsType: 'none', mountOptions: 'bind' })]);
    const record = JSON.parse(readFileSync(join(s.dataRoot, 'volumes/vol-c/volume.json'), 'utf8')) as { source: string };
    expect(record.source).toBe(source);
    writeFileSync(join(dir, 'w'), 'x');
    expect(readFileSync(join(source, 'w'), 'utf8')).toBe('x');
  });
});

describe('reconstructed options after a kubelet restart', () => {
  it('attachable: getvolumename and isattached resolve the volume from the PV name alone', async () => {
    await createVolume('vol-rc', '--backend', 'dir', '--size', '1Mi');
    await succeed(['attach', flexOptions('pv-rc', { volumeId: 'vol-rc' }), 'node-a']);
    const rec = reconstructedOptions('pv-rc');
    expect(await succeed(['getvolumename', rec])).toEqual({ status: 'Success', volumeName: 'vol-rc' });
    expect(await succeed(['isattached', rec, 'node-a'])).toEqual({ status: 'Success', attached: true });
    expect(await succeed(['isattached', rec, 'node-b'])).toEqual({ status: 'Success', attached: false });
  });

  it('attachable: a repeated mount with reconstructed options answers Success for the pod already mounted', async () => {
    await createVolume('vol-rc', '--backend', 'dir', '--size', '1Mi');
    const m = await attachAndMount('pv-rc', flexOptions('pv-rc', { volumeId: 'vol-rc' }), 'uid-rc', { volumeId: 'vol-rc' });
    await succeed(['mount', m.dir, mountOptions('pv-rc', pod('uid-rc'))]);
    expect(mountCount(m.dir)).toBe(1);
  });

  // Once a bug: only attach recorded which volume a PV names, so without attach a mount with
  // reconstructed options (the PV name, no volumeId) failed.
  it('non-attachable: a repeated mount with reconstructed options answers Success for the pod already mounted', async () => {
    nonAttachable();
    await createVolume('vol-rc', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-rc', 'pv-rc');
    await succeed(['mount', dir, mountOptions('pv-rc', pod('uid-rc'), { volumeId: 'vol-rc' })]);
    await succeed(['mount', dir, mountOptions('pv-rc', pod('uid-rc'))]);
    expect(mountCount(dir)).toBe(1);
  });
});

describe('fsGroup', () => {
  for (const key of ['kubernetes.io/mounterArgs.FsGroup', 'kubernetes.io/fsGroup']) {
    it(`${key} gives the volume root and its files the group, the root the setgid bit, both group read-write`, async () => {
      await createVolume('vol-g', '--size', '16Mi');
      const opts = flexOptions('pv-g', { volumeId: 'vol-g' });
      // A first pod (no fsGroup) leaves a root-owned file behind.
      const first = await attachAndMount('pv-g', opts, 'uid-g1');
      mkdirSync(join(first.dir, 'sub'));
      writeFileSync(join(first.dir, 'sub', 'old.txt'), 'root:root 0644', { mode: 0o644 });
      const second = podVolumeDir(s.kubeletDir, 'uid-g2', 'pv-g');
      await succeed(['mount', second, mountOptions('pv-g', pod('uid-g2'), { [key]: '4321' })]);
      for (const path of [second, join(second, 'sub')]) {
        const st = statSync(path);
        expect(st.gid, path).toBe(4321);
        expect(st.mode & 0o2000, `${path} setgid`).toBe(0o2000);
        expect(st.mode & 0o070, `${path} group rwx`).toBe(0o070);
      }
      const file = statSync(join(second, 'sub', 'old.txt'));
      expect(file.gid).toBe(4321);
      expect(file.mode & 0o060).toBe(0o060);
    });
  }

  it('non-attachable: the old kubernetes.io/fsGroup key is honoured too', async () => {
    nonAttachable();
    await createVolume('vol-g', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-g', 'pv-g');
    await succeed(['mount', dir, mountOptions('pv-g', pod('uid-g'), { volumeId: 'vol-g', 'kubernetes.io/fsGroup': '2345' })]);
    expect(statSync(dir).gid).toBe(2345);
    expect(statSync(dir).mode & 0o2000).toBe(0o2000);
  });
});

describe('read-only', () => {
  const expectReadOnly = (path: string) => {
    expect(mountAt(path)?.mountOptions, path).toContain('ro');
    expect(() => writeFileSync(join(path, 'nope'), 'x'), path).toThrow(/EROFS|read-only/);
  };

  it('non-attachable: kubernetes.io/readwrite ro and the PV option readOnly both mount the pod read-only', async () => {
    nonAttachable();
    await createVolume('vol-ro', '--backend', 'dir', '--size', '1Mi');
    const rw = podVolumeDir(s.kubeletDir, 'uid-rw', 'pv-ro');
    await succeed(['mount', rw, mountOptions('pv-ro', pod('uid-rw'), { volumeId: 'vol-ro' })]);
    writeFileSync(join(rw, 'f'), 'written rw');
    const ro1 = podVolumeDir(s.kubeletDir, 'uid-ro1', 'pv-ro');
    await succeed(['mount', ro1, mountOptions('pv-ro', pod('uid-ro1'), { volumeId: 'vol-ro', 'kubernetes.io/readwrite': 'ro' })]);
    const ro2 = podVolumeDir(s.kubeletDir, 'uid-ro2', 'pv-ro');
    await succeed(['mount', ro2, mountOptions('pv-ro', pod('uid-ro2'), { volumeId: 'vol-ro', readOnly: 'true' })]);
    for (const ro of [ro1, ro2]) {
      expectReadOnly(ro);
      expect(readFileSync(join(ro, 'f'), 'utf8')).toBe('written rw');
    }
    // The read-write pod is not made read-only by its neighbours.
    writeFileSync(join(rw, 'g'), 'still writable');
  });

  it('attachable: ro reaches mountdevice and mount', async () => {
    await createVolume('vol-ro', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-ro', { volumeId: 'vol-ro' }, 'ro');
    const m = await attachAndMount('pv-ro', opts, 'uid-ro', { 'kubernetes.io/readwrite': 'ro' });
    expectReadOnly(m.global);
    expectReadOnly(m.dir);
  });
});
