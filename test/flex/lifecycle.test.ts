import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { expectSuccess, flexOptions, mountOptions, reconstructedOptions, flexSession, podNamed, SEA_PASS } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, mountsUnder, type Scratch } from '../helpers/scratch.js';

// test/sea/flex-lifecycle.test.ts runs this file again against the single executable; tests marked
// it.skipIf(SEA_PASS) test the core rather than the executable, and run once, in the bundle's pass.

let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const { flex, ok, createVolume } = flexSession(() => s.env);
const pod = podNamed;

function catalogRecord(id: string): { attachments: { node: string }[]; capacityBytes: number } {
  return JSON.parse(readFileSync(join(s.dataRoot, 'volumes', id, 'volume.json'), 'utf8'));
}

/** The attachable sequence kubelet and the controller-manager run for one pod. */
async function attachAndMount(pv: string, opts: string, podUid: string, mountExtra: Record<string, string> = {}) {
  await ok('attach', opts, 'node-a');
  const wait = await ok('waitforattach', '', opts);
  const global = deviceMountPath(s.kubeletDir, pv);
  await ok('mountdevice', global, String(wait.reply.device ?? ''), opts);
  const dir = podVolumeDir(s.kubeletDir, podUid, pv);
  await ok('mount', dir, mountOptions(pv, pod(podUid), mountExtra));
  return { global, dir, device: String(wait.reply.device) };
}

async function unmountAndDetach(pv: string, global: string, ...podDirs: string[]) {
  for (const d of podDirs) await ok('unmount', d);
  await ok('unmountdevice', global);
  await ok('detach', pv, 'node-a');
}

describe('init and unknown verbs', () => {
  it('reports capabilities: attachable by default, fsGroup applied by twinvol', async () => {
    const r = await ok('init');
    expect(r.reply).toEqual({ status: 'Success', capabilities: { fsGroup: false } });
  });

  it('reports attach:false when installed non-attachable', async () => {
    writeFileSync(s.env.TWINVOL_CONFIG!, JSON.stringify({ flexAttach: false }));
    const r = await ok('init');
    expect(r.reply).toEqual({ status: 'Success', capabilities: { attach: false, fsGroup: false } });
  });

  it('answers Not supported, exit 0 and no usage text, for verbs it does not know', async () => {
    for (const verb of ['frobnicate', 'getmetrics', '', 'INIT']) {
      const r = await flex(verb, '{}');
      expect(r.reply).toEqual({ status: 'Not supported' });
      expect(r.exitCode).toBe(0);
    }
  });
});

describe('attachable lifecycle (block volume)', () => {
  it('attaches, formats, mounts, keeps data across a full cycle, and leaves nothing behind', async () => {
    await createVolume('vol-a', '--size', '64Mi');
    const opts = flexOptions('pv-a', { volumeId: 'vol-a' });
    expect((await ok('getvolumename', opts)).reply.volumeName).toBe('vol-a');
    expect((await ok('isattached', opts, 'node-a')).reply.attached).toBe(false);

    const first = await attachAndMount('pv-a', opts, 'uid-1', { 'kubernetes.io/mounterArgs.FsGroup': '3000' });
    expect(first.device).toMatch(/^\/dev\/loop\d+$/);
    expect(catalogRecord('vol-a').attachments.map((a) => a.node)).toEqual(['node-a']);
    expect((await ok('isattached', opts, 'node-a')).reply.attached).toBe(true);
    expect(mountAt(first.global)?.source).toBe(first.device);
    expect(mountAt(first.global)?.fsType).toBe('ext4');
    expect(mountAt(first.dir)).toBeDefined();
    expect(statSync(first.dir).gid).toBe(3000);
    writeFileSync(join(first.dir, 'hello.txt'), 'kept across cycles');

    await unmountAndDetach('pv-a', first.global, first.dir);
    expect(mountsUnder(s.root)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    expect(catalogRecord('vol-a').attachments).toEqual([]);
    expect(existsSync(first.dir)).toBe(false);

    // A second cycle must find the filesystem, not make a new one.
    const second = await attachAndMount('pv-a', opts, 'uid-2');
    expect(readFileSync(join(second.dir, 'hello.txt'), 'utf8')).toBe('kept across cycles');
    await unmountAndDetach('pv-a', second.global, second.dir);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });

  it.skipIf(SEA_PASS)('refuses a second node for a single-node volume and names the holder', async () => {
    await createVolume('vol-x', '--size', '16Mi');
    const opts = flexOptions('pv-x', { volumeId: 'vol-x' });
    await ok('attach', opts, 'node-a');
    const r = await flex('attach', opts, 'node-b');
    expect(r.exitCode).toBe(1);
    expect(r.reply.status).toBe('Failure');
    expect(String(r.reply.message)).toContain('node-a');
    expect(catalogRecord('vol-x').attachments.map((a) => a.node)).toEqual(['node-a']);
  });

  it.skipIf(SEA_PASS)('lets a multi-node volume attach to two nodes', async () => {
    await createVolume('vol-m', '--backend', 'dir', '--size', '1Mi', '--access', 'multi-node');
    const opts = flexOptions('pv-m', { volumeId: 'vol-m' });
    await ok('attach', opts, 'node-a');
    await ok('attach', opts, 'node-b');
    expect(catalogRecord('vol-m').attachments.map((a) => a.node)).toEqual(['node-a', 'node-b']);
  });

  it.skipIf(SEA_PASS)('formats xfs when asked and mounts read-only pods read-only', async () => {
    await createVolume('vol-xfs', '--size', '320Mi', '--fs-type', 'xfs');
    const opts = flexOptions('pv-xfs', { volumeId: 'vol-xfs' });
    const rw = await attachAndMount('pv-xfs', opts, 'uid-rw');
    expect(mountAt(rw.global)?.fsType).toBe('xfs');
    writeFileSync(join(rw.dir, 'f'), 'x');
    const roDir = podVolumeDir(s.kubeletDir, 'uid-ro', 'pv-xfs');
    await ok('mount', roDir, mountOptions('pv-xfs', pod('uid-ro'), { 'kubernetes.io/readwrite': 'ro' }));
    expect(mountAt(roDir)?.mountOptions).toContain('ro');
    expect(() => writeFileSync(join(roDir, 'g'), 'y')).toThrow(/EROFS|read-only/);
    expect(readFileSync(join(roDir, 'f'), 'utf8')).toBe('x');
    await unmountAndDetach('pv-xfs', rw.global, rw.dir, roDir);
    expect(mountsUnder(s.root)).toEqual([]);
  });

  it.skipIf(SEA_PASS)('never reformats an image that already holds a filesystem', async () => {
    await createVolume('vol-keep', '--size', '300Mi', '--fs-type', 'xfs'); // the least xfs is made at (shared/size.ts)
    const img = join(s.dataRoot, 'volumes/vol-keep/image.img');
    execFileSync('mkfs.ext4', ['-q', '-F', img]);
    const opts = flexOptions('pv-keep', { volumeId: 'vol-keep' });
    await ok('attach', opts, 'node-a');
    await ok('waitforattach', '', opts);
    const r = await flex('mountdevice', deviceMountPath(s.kubeletDir, 'pv-keep'), '', opts);
    expect(r.reply.status).toBe('Failure');
    expect(String(r.reply.message)).toMatch(/holds a ext4 filesystem, not xfs/);
    expect(execFileSync('blkid', ['-p', '-s', 'TYPE', '-o', 'value', img]).toString().trim()).toBe('ext4');
  });
});

describe('non-attachable lifecycle', () => {
  beforeEach(() => writeFileSync(s.env.TWINVOL_CONFIG!, JSON.stringify({ flexAttach: false })));

  for (const backend of ['block', 'dir'] as const) {
    it.skipIf(SEA_PASS && backend === 'block')(`mounts a ${backend} volume with mount alone and releases everything with unmount`, async () => {
      const opts = { volumeId: `auto-${backend}`, createIfMissing: 'true', size: '32Mi', backend };
      const dir1 = podVolumeDir(s.kubeletDir, 'p1', 'pv');
      const dir2 = podVolumeDir(s.kubeletDir, 'p2', 'pv');
      await ok('mount', dir1, mountOptions('pv', pod('p1'), opts));
      await ok('mount', dir2, mountOptions('pv', pod('p2'), opts));
      writeFileSync(join(dir1, 'shared.txt'), 'both pods see this');
      expect(readFileSync(join(dir2, 'shared.txt'), 'utf8')).toBe('both pods see this');
      expect(catalogRecord(`auto-${backend}`).attachments.map((a) => a.node)).toEqual(['node-a']);

      await ok('unmount', dir1);
      expect(readFileSync(join(dir2, 'shared.txt'), 'utf8')).toBe('both pods see this');
      expect(catalogRecord(`auto-${backend}`).attachments.length).toBe(1);
      await ok('unmount', dir2);
      expect(mountsUnder(s.root)).toEqual([]);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
      expect(catalogRecord(`auto-${backend}`).attachments).toEqual([]);
    });
  }
});

describe('static volumes', () => {
  it.skipIf(SEA_PASS)('mounts tmpfs with its options through the attachable flow', async () => {
    await createVolume('scratch', '--backend', 'static', '--source', 'tmpfs', '--fs-type', 'tmpfs', '--mount-options', 'size=8m,mode=0755');
    const opts = flexOptions('pv-t', { volumeId: 'scratch' });
    const m = await attachAndMount('pv-t', opts, 'uid-t');
    expect(mountAt(m.global)?.fsType).toBe('tmpfs');
    expect((await statfs(m.dir)).blocks * (await statfs(m.dir)).bsize).toBe(8 * 1024 * 1024);
    await unmountAndDetach('pv-t', m.global, m.dir);
    expect(mountsUnder(s.root)).toEqual([]);
  });

  it.skipIf(SEA_PASS)('mounts a pre-made ext4 image file through a loop mount', async () => {
    const img = join(s.root, 'premade.img');
    execFileSync('truncate', ['-s', '16M', img]);
    execFileSync('mkfs.ext4', ['-q', '-F', img]);
    await createVolume('premade', '--backend', 'static', '--source', img, '--fs-type', 'ext4', '--mount-options', 'loop');
    const opts = flexOptions('pv-i', { volumeId: 'premade' });
    const m = await attachAndMount('pv-i', opts, 'uid-i');
    expect(mountAt(m.global)?.fsType).toBe('ext4');
    expect(existsSync(join(m.dir, 'lost+found'))).toBe(true);
    await unmountAndDetach('pv-i', m.global, m.dir);
    expect(mountsUnder(s.root)).toEqual([]);
  });
});

// Node reboots: test/reliability/reboot-flex.test.ts and reboot-half-flex.test.ts.
describe('kubelet restarts', () => {
  it.skipIf(SEA_PASS)('tears down from records alone, and resolves reconstructed options through the PV record', async () => {
    await createVolume('vol-r', '--size', '32Mi');
    const opts = flexOptions('pv-r', { volumeId: 'vol-r' });
    await ok('attach', opts, 'node-a');
    // After the restart kubelet only knows the PV name.
    const rec = reconstructedOptions('pv-r');
    const wait = await ok('waitforattach', '', rec);
    const global = deviceMountPath(s.kubeletDir, 'pv-r');
    await ok('mountdevice', global, String(wait.reply.device), rec);
    const dir = podVolumeDir(s.kubeletDir, 'uid-r', 'pv-r');
    await ok('mount', dir, mountOptions('pv-r', pod('uid-r')));
    expect(mountAt(dir)).toBeDefined();
    await ok('unmount', dir);
    await ok('unmountdevice', global);
    await ok('detach', 'pv-r', 'node-a');
    expect(catalogRecord('vol-r').attachments).toEqual([]);
    expect(mountsUnder(s.root)).toEqual([]);
  });
});

describe('idempotency', () => {
  it.skipIf(SEA_PASS)('answers every repeated call the same way', async () => {
    await createVolume('vol-i', '--size', '32Mi');
    const opts = flexOptions('pv-i', { volumeId: 'vol-i' });
    const global = deviceMountPath(s.kubeletDir, 'pv-i');
    const dir = podVolumeDir(s.kubeletDir, 'uid-i', 'pv-i');
    const mopts = mountOptions('pv-i', pod('uid-i'));
    const steps: string[][] = [
      ['attach', opts, 'node-a'],
      ['waitforattach', '', opts],
      ['mountdevice', global, '', opts],
      ['mount', dir, mopts],
      ['unmount', dir],
      ['unmountdevice', global],
      ['detach', 'pv-i', 'node-a'],
    ];
    for (const step of steps) {
      const replies = [];
      for (let i = 0; i < 3; i++) replies.push((await ok(...step)).output);
      expect(new Set(replies).size, `${step[0]} answered differently when repeated`).toBe(1);
      if (step[0] === 'mount') expect(mountsUnder(dir)).toEqual([dir]);
    }
    expect(mountsUnder(s.root)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });
});

describe('expansion', () => {
  const MiB = 2 ** 20;
  const grow = (opts: string, m: { device: string; global: string }) =>
    ok('expandvolume', opts, 'relative/path', String(640 * MiB), String(320 * MiB)).then(async (r) => {
      expect(r.reply.volumeNewSize).toBe(640 * MiB);
      return flex('expandfs', opts, m.device, m.global, String(640 * MiB), String(320 * MiB));
    });

  it.skipIf(SEA_PASS)('grows an xfs volume online: image by expandvolume, filesystem by expandfs', async () => {
    await createVolume('vol-gx', '--size', '320Mi', '--fs-type', 'xfs');
    const opts = flexOptions('pv-gx', { volumeId: 'vol-gx' });
    const m = await attachAndMount('pv-gx', opts, 'uid-gx');
    writeFileSync(join(m.dir, 'data'), 'still here');
    const before = (await statfs(m.dir)).blocks;
    expectSuccess(await grow(opts, m));
    expect(statSync(join(s.dataRoot, 'volumes/vol-gx/image.img')).size).toBe(640 * MiB);
    expect((await statfs(m.dir)).blocks).toBeGreaterThan(before * 1.8);
    expect(readFileSync(join(m.dir, 'data'), 'utf8')).toBe('still here');
    await unmountAndDetach('pv-gx', m.global, m.dir);
  });

  it.skipIf(SEA_PASS)('grows an ext4 volume online where the kernel permits it, otherwise at the next stage', async () => {
    await createVolume('vol-ge', '--size', '320Mi');
    const opts = flexOptions('pv-ge', { volumeId: 'vol-ge' });
    const m = await attachAndMount('pv-ge', opts, 'uid-ge');
    writeFileSync(join(m.dir, 'data'), 'still here');
    const before = (await statfs(m.dir)).blocks;
    const r = await grow(opts, m);
    if (hasCapSysResource()) {
      expectSuccess(r);
      expect((await statfs(m.dir)).blocks).toBeGreaterThan(before * 1.8);
    } else {
      expect(r.exitCode).toBe(1);
      expect(String(r.reply.message)).toContain('CAP_SYS_RESOURCE');
      expect((await statfs(m.dir)).blocks).toBe(before);
    }
    await unmountAndDetach('pv-ge', m.global, m.dir);
    const again = await attachAndMount('pv-ge', opts, 'uid-ge2');
    expect((await statfs(again.dir)).blocks).toBeGreaterThan(before * 1.8);
    expect(readFileSync(join(again.dir, 'data'), 'utf8')).toBe('still here');
    await unmountAndDetach('pv-ge', again.global, again.dir);
  });
});

/** CAP_SYS_RESOURCE (bit 24) is what the kernel asks of an online ext4 resize. */
function hasCapSysResource(): boolean {
  const line = readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith('CapEff:')) ?? '';
  return (BigInt(`0x${line.split(/\s+/)[1] ?? '0'}`) & (1n << 24n)) !== 0n;
}
