import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readMounts } from '../../shared/mountinfo.js';
import { outcome } from '../csi/helpers/client.js';
import { deviceSize, fsTotalBytes } from '../csi/helpers/data.js';
import { MiB, mountCap, size, stagingPath } from '../csi/helpers/requests.js';
import { type ExecSuite, type TestDriver, useExecServer } from './helpers.js';

/**
 * kubelet's own work where a driver answers "Not supported" (pkg/volume/flexvolume attacher-defaults.go,
 * expander-defaults.go), through the real CSI server: test/exec/drivers/loop.sh as "loopbare" attaches
 * and leaves the rest to kubelet; as "loopcrash" it is killed in detach before it does anything.
 */
const strict = useExecServer();
const lenient = useExecServer(() => ['--flex-lenient', 'acme/loopcrash']);

const fsTypeAt = (path: string) => readMounts().find((m) => m.mountPoint === path)?.fsType;

/** A blank sparse image, a volume of `driver` over it (CreateVolume: its size is known) attached to node-a. */
async function attached(csi: ExecSuite, driver: TestDriver, id: string, bytes: number, fsType: string, readonly = false) {
  const image = join(csi.s.root, `${id}.img`);
  writeFileSync(image, '');
  truncateSync(image, bytes);
  const params = { backend: 'exec', driver: `acme/${driver}`, fsType, image };
  const ctx = (await csi.ctl('CreateVolume', { name: id, parameters: params, volume_capabilities: [mountCap(fsType)], capacity_range: size(bytes) })).volume.volume_context;
  const pub = await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap(fsType), volume_context: ctx, readonly });
  const staging = stagingPath(csi.s.kubeletDir, id);
  const stage = () => csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: mountCap(fsType), volume_context: ctx });
  const teardown = async () => {
    await csi.node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    await csi.ctl('DeleteVolume', { volume_id: id });
  };
  return { image, staging, device: pub.publish_context.device ?? '', stage, teardown };
}

/**
 * An ext4 on `device` holding one file, `f`, damaged by `damage` (a debugfs request) and marked not
 * cleanly unmounted, as after a crash: `fsck -a` then checks it in full rather than answering "clean".
 * Answers what `f` holds.
 */
function damagedExt4(csi: ExecSuite, device: string, damage: string): string {
  const content = join(csi.s.root, 'f.txt');
  writeFileSync(content, 'written before the damage\n');
  execFileSync('mkfs.ext4', ['-q', '-F', '--', device]);
  for (const request of [`write ${content} f`, damage, 'ssv state 0']) execFileSync('debugfs', ['-w', '-R', request, device], { stdio: 'ignore' });
  // Damaged indeed: a check that changes nothing (-n) finds errors and leaves them (4).
  expect(spawnSync('e2fsck', ['-n', device], { stdio: 'ignore' }).status).toBe(4);
  return readFileSync(content, 'utf8');
}

describe('exec backend: kubelet\'s fallbacks for "Not supported"', () => {
  it('mountdevice Not supported on a blank device: formatted with the PV\'s fsType and mounted, as kubelet\'s FormatAndMount does', async () => {
    const vol = await attached(strict, 'loopbare', 'bare-fmt-1', 64 * MiB, 'ext4');
    try {
      const r = await outcome(vol.stage());
      expect(r.code, r.message).toBe('OK');
      expect(fsTypeAt(vol.staging)).toBe('ext4');
      // A repeat, and a stage after an unstage, keep the filesystem: formatted only while blank.
      writeFileSync(join(vol.staging, 'kept'), 'data');
      expect((await outcome(vol.stage())).code).toBe('OK');
      await strict.node('NodeUnstageVolume', { volume_id: 'bare-fmt-1', staging_target_path: vol.staging });
      expect(fsTypeAt(vol.staging)).toBeUndefined();
      expect((await outcome(vol.stage())).code).toBe('OK');
      expect(readFileSync(join(vol.staging, 'kept'), 'utf8')).toBe('data');
    } finally {
      await vol.teardown();
    }
  });

  it('mountdevice Not supported on a damaged ext4 that fsck -a can repair: repaired, then mounted, as kubelet\'s FormatAndMount does', async () => {
    const vol = await attached(strict, 'loopbare', 'bare-fsck-fix-1', 16 * MiB, 'ext4');
    try {
      // A wrong link count: e2fsck fixes it unattended (exit 1); mounted as it was, the file kept it.
      const content = damagedExt4(strict, vol.device, 'sif f links_count 5');
      const r = await outcome(vol.stage());
      expect(r.code, r.message).toBe('OK');
      expect(fsTypeAt(vol.staging)).toBe('ext4');
      expect(statSync(join(vol.staging, 'f')).nlink).toBe(1);
      expect(readFileSync(join(vol.staging, 'f'), 'utf8')).toBe(content);
      await strict.node('NodeUnstageVolume', { volume_id: 'bare-fsck-fix-1', staging_target_path: vol.staging });
      expect(spawnSync('e2fsck', ['-n', vol.device], { stdio: 'ignore' }).status).toBe(0);
    } finally {
      await vol.teardown();
    }
  });

  it('mountdevice Not supported on a damaged ext4 that fsck -a cannot repair (exit 4): the stage fails saying so, nothing mounted, as kubelet refuses', async () => {
    const vol = await attached(strict, 'loopbare', 'bare-fsck-bad-1', 16 * MiB, 'ext4');
    try {
      // The file's extent points past the end of the filesystem: e2fsck -p will not decide that alone.
      // The kernel mounts this filesystem all the same, which is why it must not get that far.
      damagedExt4(strict, vol.device, 'sif f block[5] 9999999');
      const r = await outcome(vol.stage());
      expect(r.code).toBe('FAILED_PRECONDITION');
      expect(r.message).toMatch(new RegExp(`^volume bare-fsck-bad-1: fsck found errors on device ${vol.device} that it could not correct unattended \\(.*invalid extent.*\\): repair the filesystem \\(fsck without -a\\) before staging it$`));
      expect(fsTypeAt(vol.staging)).toBeUndefined();
      // Left for the operator as found: fsck -a changed nothing it was not sure of.
      expect(spawnSync('e2fsck', ['-n', vol.device], { stdio: 'ignore' }).status).toBe(4);
      // A retry meets the same check, not a staging half made by the first.
      expect((await outcome(vol.stage())).code).toBe('FAILED_PRECONDITION');
    } finally {
      await vol.teardown();
    }
  });

  it('mountdevice Not supported, staged read-only: the filesystem found is mounted unchecked, as kubelet checks only what it mounts read-write', async () => {
    const vol = await attached(strict, 'loopbare', 'bare-fsck-ro-1', 16 * MiB, 'ext4', true);
    try {
      damagedExt4(strict, vol.device, 'sif f block[5] 9999999');
      const r = await outcome(vol.stage());
      expect(r.code, r.message).toBe('OK');
      expect(readMounts().find((m) => m.mountPoint === vol.staging)?.mountOptions).toContain('ro');
      await strict.node('NodeUnstageVolume', { volume_id: 'bare-fsck-ro-1', staging_target_path: vol.staging });
      expect(spawnSync('e2fsck', ['-n', vol.device], { stdio: 'ignore' }).status).toBe(4);
    } finally {
      await vol.teardown();
    }
  });

  it('mountdevice Not supported on a disk with a partition table and no filesystem: refused, never formatted, as kubelet refuses', async () => {
    const vol = await attached(strict, 'loopbare', 'bare-parts-1', 16 * MiB, 'ext4');
    try {
      // One MBR (dos) partition entry of type 0x83 from sector 2048, and the boot signature.
      const mbr = Buffer.alloc(512);
      mbr.writeUInt8(0x83, 446 + 4);
      mbr.writeUInt32LE(2048, 446 + 8);
      mbr.writeUInt32LE(30720, 446 + 12);
      mbr.writeUInt16LE(0xaa55, 510);
      const fd = openSync(vol.device, 'r+');
      try {
        writeSync(fd, mbr, 0, 512, 0);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      const r = await outcome(vol.stage());
      expect(r.code).toBe('FAILED_PRECONDITION');
      expect(r.message).toMatch(/dos partition table/);
      expect(fsTypeAt(vol.staging)).toBeUndefined();
      expect(execFileSync('blkid', ['-p', '-o', 'export', '--', vol.device], { encoding: 'utf8' })).toMatch(/^PTTYPE=dos$/m);
    } finally {
      await vol.teardown();
    }
  });

  it('expandfs Not supported: the filesystem on the device grows, as kubelet\'s generic resize does', async () => {
    // xfs grows online with the privileges a test container has (ext4 also wants CAP_SYS_RESOURCE).
    const vol = await attached(strict, 'loopbare', 'bare-grow-1', 320 * MiB, 'xfs');
    try {
      await vol.stage();
      expect(fsTypeAt(vol.staging)).toBe('xfs');
      const before = fsTotalBytes(vol.staging);
      const grown = await strict.ctl('ControllerExpandVolume', { volume_id: 'bare-grow-1', capacity_range: size(480 * MiB), volume_capability: mountCap('xfs') });
      expect(grown.node_expansion_required).toBe(true);
      // The driver's expandvolume grew the image and the device; the filesystem is kubelet's to grow.
      expect(deviceSize(vol.device)).toBe(480 * MiB);
      const r = await outcome(strict.node('NodeExpandVolume', { volume_id: 'bare-grow-1', volume_path: vol.staging, staging_target_path: vol.staging, capacity_range: size(480 * MiB) }));
      expect(r.code, r.message).toBe('OK');
      expect(fsTotalBytes(vol.staging)).toBeGreaterThan(before + 100 * MiB);
      expect(strict.calls('loopbare').filter((c) => c[0] === 'expandfs')).toHaveLength(1);
    } finally {
      await vol.teardown();
    }
  });
});

describe('exec backend: a driver killed by a signal', () => {
  it('read leniently, its empty output is a failure, not "Not supported": the detach is not skipped, and is asked again', async () => {
    const id = 'crash-detach-1';
    const image = join(lenient.s.root, `${id}.img`);
    writeFileSync(image, '');
    truncateSync(image, 16 * MiB);
    const ctx = { backend: 'exec', driver: 'acme/loopcrash', image };
    const pub = await lenient.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap(), volume_context: ctx });
    const device = pub.publish_context.device ?? '';
    const backing = `/sys/block/${device.slice(5)}/loop/backing_file`;
    try {
      expect(readFileSync(backing, 'utf8').trim()).toBe(image);
      for (let i = 0; i < 2; i++) {
        // The OOM killer's SIGKILL is no answer: the device is still attached, and the CO must retry.
        const r = await outcome(lenient.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' }));
        expect(r.code).toBe('INTERNAL');
        expect(r.message).toMatch(/SIGKILL|signal/);
      }
      expect(lenient.calls('loopcrash').filter((c) => c[0] === 'detach')).toHaveLength(2);
      expect(readFileSync(backing, 'utf8').trim()).toBe(image);
    } finally {
      if (existsSync(backing)) execFileSync('losetup', ['-d', device]);
    }
  });

  it('an isattached that fails leaves the attachment standing, as kubelet\'s VolumesAreAttached does: ListVolumes and ControllerGetVolume still answer', async () => {
    const id = 'crash-isattached-1';
    const image = join(strict.s.root, `${id}.img`);
    writeFileSync(image, '');
    truncateSync(image, 16 * MiB);
    const ctx = { backend: 'exec', driver: 'acme/loopcrash', image };
    const pub = await strict.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap(), volume_context: ctx });
    const device = pub.publish_context.device ?? '';
    try {
      // Each throws (and fails the test) with the status a failed isattached gave the whole call.
      const got = await strict.ctl('ControllerGetVolume', { volume_id: id });
      expect(got.status?.published_node_ids).toEqual(['node-a']);
      const listed = await strict.ctl('ListVolumes', {});
      expect(listed.entries.find((e) => e.volume.volume_id === id)?.status?.published_node_ids).toEqual(['node-a']);
      expect(strict.calls('loopcrash').filter((c) => c[0] === 'isattached').length).toBeGreaterThan(0);
    } finally {
      if (existsSync(`/sys/block/${device.slice(5)}/loop`)) execFileSync('losetup', ['-d', device]);
    }
  });
});
