import { execFileSync } from 'node:child_process';
import { closeSync, openSync, writeSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { attach } from '../../shared/core/attachments.js';
import type { Core } from '../../shared/core/core.js';
import { stage, unstage } from '../../shared/core/staging.js';
import { createVolume } from '../../shared/core/volumes.js';
import { findLoopDevice } from '../../shared/loop-devices.js';
import { mountAt } from '../../shared/mountinfo.js';
import { setNativeMountPath } from '../../shared/native-mount.js';
import { MiB, stagingPath as csiStagingPath } from '../csi/helpers/requests.js';
import { nid, vid } from '../helpers/ids.js';
import { loopAttribute, loopsLeftUnder, loopsUnder, mountsUnder, type Scratch } from '../helpers/scratch.js';
import { measure } from '../perf/in-process.js';
import { useScratchCore } from './core-scratch.js';
import { expectRejects } from './expect-error.js';

// How a block volume's loop device comes and goes (shared/backends/block.ts stage and nodeDetach,
// shared/mounter.ts mountImage): a usual stage binds the device through the mount addon (or mount -o
// loop without it), flagged to be released by the kernel at its last close, so neither stage nor
// unstage runs losetup. test/perf/counts.test.ts counts the same for every verb; this file covers the
// cases around it.

let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

// A test that runs without the addon (setNativeMountPath(null)) leaves the next one with it.
afterEach(() => setNativeMountPath(undefined));

const stagingPath = (pv: string) => csiStagingPath(s.kubeletDir, pv);
const autoclear = (device: string) => loopAttribute(device, 'autoclear');

async function blockVolume(id: string, capacityBytes = 64 * MiB) {
  await createVolume(core, { id, backend: 'block', capacityBytes, createdBy: 'cli' });
  await attach(core, vid(id), nid('node-a'), { readonly: false, via: 'cli' });
}

describe('a block volume staged on a device bound for the mount alone', () => {
  it('stages with no process (the addon binds the device and mounts it), on a device the kernel releases at the unmount: unstage is that unmount alone', async () => {
    await blockVolume('b');
    const staging = stagingPath('pv-b');
    const staged = await measure(() => stage(core, vid('b'), staging, { readonly: false }));
    expect(staged.work).toMatchObject({ spawns: [], systemCalls: ['ioctl', 'mount'] });
    const { device } = staged.result;
    expect(device).toMatch(/^\/dev\/loop\d+$/);
    expect(findLoopDevice(core.catalog.imagePath('b'))).toBe(device);
    expect(mountAt(staging)).toMatchObject({ source: device, fsType: 'ext4' });
    expect(autoclear(device)).toBe('1');

    // The unmount is a system call (shared/native-mount.ts): no process at all.
    const unstaged = await measure(() => unstage(core, staging));
    expect(unstaged.work.spawns).toEqual([]);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });

  it('without the addon, stages with one mount -o loop, on a device flagged the same', async () => {
    setNativeMountPath(null);
    await blockVolume('m');
    const staging = stagingPath('pv-m');
    const staged = await measure(() => stage(core, vid('m'), staging, { readonly: false }));
    expect(staged.work).toMatchObject({ spawns: ['mount'], systemCalls: [] });
    expect(autoclear(staged.result.device)).toBe('1');
    const unstaged = await measure(() => unstage(core, staging));
    expect(unstaged.work.spawns).toEqual(['umount']);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });

  it('leaves a device still open elsewhere at the unstage to the kernel, which releases it at that last close', async () => {
    await blockVolume('h');
    const staging = stagingPath('pv-h');
    const { device } = await stage(core, vid('h'), staging, { readonly: false });
    // Another opener, as udev's probe of a new device can be: the unmount is not the last close.
    const fd = openSync(device, 'r');
    try {
      const unstaged = await measure(() => unstage(core, staging));
      // losetup --detach of such a device would only set the flag it has (and could race its release).
      expect(unstaged.work.spawns).toEqual([]);
      expect(mountAt(staging)).toBeUndefined();
      expect(loopsUnder(s.root)).toEqual([device]);
    } finally {
      closeSync(fd);
    }
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });

  it('attaches a read-only stage as losetup would, so that a read-write one can still mount its device, and detaches it at the unstage', async () => {
    await blockVolume('r');
    const staging = stagingPath('pv-r');
    const staged = await measure(() => stage(core, vid('r'), staging, { readonly: true }));
    expect(staged.work).toMatchObject({ spawns: [], systemCalls: ['ioctl', 'mount'] });
    expect(autoclear(staged.result.device)).toBe('0');
    expect(mountAt(staging)?.mountOptions).toContain('ro');
    const unstaged = await measure(() => unstage(core, staging));
    expect(unstaged.work).toMatchObject({ spawns: [], systemCalls: ['umount2', 'ioctl'] });
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });

  it('refuses, by name, an image another filesystem was written over, and leaves no device, mount or record', async () => {
    // mkfs.xfs wants 300 MiB; the image is sparse, so this costs little.
    await blockVolume('x', 320 * MiB);
    execFileSync('mkfs.xfs', ['-q', '-f', core.catalog.imagePath('x')]);
    const staging = stagingPath('pv-x');
    const refused = await measure(() => expectRejects(stage(core, vid('x'), staging, { readonly: false }), 'FailedPrecondition', 'volume x holds a xfs filesystem, not ext4; refusing to mount or reformat it'));
    // mount(2) refused the device (EINVAL: no ext4 on it), mount(8) was given the step and failed in
    // its own words, and blkid named what is there; the device went with the descriptor held for it.
    expect(refused.work).toMatchObject({ systemCalls: ['ioctl', 'mount:EINVAL'], spawns: ['mount', 'blkid'] });
    expect(mountAt(staging)).toBeUndefined();
    expect(await core.nodeState.listAll()).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });

  it('refuses a volume asked for as another type than create made before it sets up any device', async () => {
    await blockVolume('t');
    // A record that says xfs over the ext4 create made (its fsType edited): nothing to attach for.
    await core.catalog.updateVolume('t', (v) => ({ ...v, fsType: 'xfs' }));
    const refused = await measure(() => expectRejects(stage(core, vid('t'), stagingPath('pv-t'), { readonly: false }), 'FailedPrecondition', 'volume t holds a ext4 filesystem, not xfs; refusing to mount or reformat it'));
    expect(refused.work.spawns).toEqual([]);
    expect(loopsUnder(s.root)).toEqual([]);
  });

  it('refuses to stage an image it cannot open for writing, and leaves no read-only device behind for each retry', async () => {
    await blockVolume('w');
    const image = core.catalog.imagePath('w');
    // The image alone read-only (a bind of it over itself), as on a data root mounted read-only: the
    // addon's open fails (EROFS), and losetup then binds the image read-only with a warning alone.
    execFileSync('mount', ['--bind', image, image]);
    try {
      execFileSync('mount', ['-o', 'remount,bind,ro', image]);
      for (let i = 0; i < 2; i++)
        await expectRejects(stage(core, vid('w'), stagingPath('pv-w'), { readonly: false, block: true }), 'FailedPrecondition', 'the image of volume w cannot be opened for writing');
      expect(loopsUnder(s.root)).toEqual([]);
      expect(await core.nodeState.listAll()).toEqual([]);
    } finally {
      // A device bound to the image keeps its bind busy: detached first, or both outlive the test.
      for (const device of loopsUnder(s.root)) execFileSync('losetup', ['-d', device]);
      execFileSync('umount', [image]);
    }
  });

  it('never formats an image a pod partitioned through raw block access, when it is then staged as a filesystem', async () => {
    // Created for raw block access only: no filesystem is made, and a pod wrote a partition table.
    await createVolume(core, { id: 'p', backend: 'block', capacityBytes: 16 * MiB, createdBy: 'cli', accessRequests: [{ scope: 'single-node', raw: true, readerOnly: false, singleWriter: false, fsType: '' }] });
    await attach(core, vid('p'), nid('node-a'), { readonly: false, via: 'cli' });
    const image = core.catalog.imagePath('p');
    // One MBR (dos) partition entry of type 0x83 from sector 2048, and the boot signature.
    const mbr = Buffer.alloc(512);
    mbr.writeUInt8(0x83, 446 + 4);
    mbr.writeUInt32LE(2048, 446 + 8);
    mbr.writeUInt32LE(30720, 446 + 12);
    mbr.writeUInt16LE(0xaa55, 510);
    const fd = openSync(image, 'r+');
    try {
      writeSync(fd, mbr, 0, 512, 0);
    } finally {
      closeSync(fd);
    }
    // Once formatted ext4 over the partitions: blkid names no TYPE for a partitioned disk.
    await expectRejects(stage(core, vid('p'), stagingPath('pv-p'), { readonly: false }), 'FailedPrecondition', 'holds a dos partition table and no filesystem');
    expect(execFileSync('blkid', ['-p', '-o', 'export', '--', image], { encoding: 'utf8' })).toMatch(/^PTTYPE=dos$/m);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
  });
});
