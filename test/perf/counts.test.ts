import { execFileSync } from 'node:child_process';
import { mkdirSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import * as v from 'valibot';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createVolume } from '../../shared/core/volumes.js';
import { nativeMount } from '../../shared/native-mount.js';
import { mountAt } from '../../shared/mountinfo.js';
import { vid } from '../helpers/ids.js';
import { coreIn } from '../shared/core-scratch.js';
import { flexOptions, mountOptions, podNamed } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';
import { blockCap, mountCap, MiB, size, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { installDrivers, VENDOR } from '../exec/helpers.js';
import { flexCall, inProcessCsi, measure, type Work } from './in-process.js';

/**
 * The work each FlexVolume verb and CSI RPC does, counted rather than timed, so a regression shows
 * without a clock: the tools spawned, the mounts made as system calls, fsyncs, record reads, locks
 * and reads of the kernel's mount table (test/perf/in-process.ts), in that order in each row. The
 * node state lives on a tmpfs, as in production (docs/architecture.md, State). Each table is today's
 * counts; lowering one is a change to this file, raising one is a regression to explain.
 */
let s: Scratch;
beforeEach(() => {
  s = createScratch('bench', '/tmp/twinvol-counts-');
  mkdirSync(s.stateDir, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m,mode=0700', 'tmpfs', s.stateDir]);
});
afterEach(() => s.cleanup());

type Table = Record<string, Work>;
/** One row: w(spawns, system calls, fsyncs, record reads, locks, mount table reads). */
const w = (spawns: string[], systemCalls: string[], fsyncs: number, reads: number, locks: number, mountTableReads: number): Work => ({ spawns, systemCalls, fsyncs, reads, locks, mountTableReads });

describe('FlexVolume: the work of each verb', () => {
  it('of a block volume through its attachable lifecycle, and of a dir volume mounted and unmounted', async () => {
    const core = coreIn(s, 'bench');
    await createVolume(core, { id: 'vol-blk', backend: 'block', capacityBytes: 64 * MiB, createdBy: 'flex' });
    await createVolume(core, { id: 'vol-dir', backend: 'dir', capacityBytes: MiB, createdBy: 'flex' });
    const opts = flexOptions('pv-blk', { volumeId: 'vol-blk' });
    const global = deviceMountPath(s.kubeletDir, 'pv-blk');
    const target = podVolumeDir(s.kubeletDir, 'uid-b', 'pv-blk');
    const dirTarget = podVolumeDir(s.kubeletDir, 'uid-d', 'pv-dir');
    const got: Table = {};
    const count = async (name: string, verb: string, ...args: string[]) => {
      const { result, work } = await measure(() => flexCall(s, verb, ...args));
      got[name] = work;
      return result;
    };
    await count('getvolumename', 'getvolumename', opts);
    await count('isattached', 'isattached', opts, 'bench');
    await count('attach', 'attach', opts, 'bench');
    const { device } = (await count('waitforattach', 'waitforattach', '', opts)) as { device?: string };
    await count('mountdevice (first)', 'mountdevice', global, String(device), opts);
    await count('mount', 'mount', target, mountOptions('pv-blk', podNamed('uid-b')));
    await count('unmount', 'unmount', target);
    await count('unmountdevice', 'unmountdevice', global);
    await count('mountdevice (again)', 'mountdevice', global, String(device), opts);
    await count('unmountdevice (again)', 'unmountdevice', global);
    await count('detach', 'detach', 'pv-blk', 'bench');
    await count('mount (dir volume)', 'mount', dirTarget, mountOptions('pv-dir', podNamed('uid-d'), { volumeId: 'vol-dir' }));
    await count('unmount (dir volume)', 'unmount', dirTarget);
    expect(got).toEqual(FLEX_EXPECTED);
  });
});

describe('CSI: the work of each RPC', () => {
  it('has the mount addon that npm ci built, as the CSI server and the FlexVolume executable have beside them', () => {
    expect(nativeMount(), 'build/Release/twinvol_mount.node did not load: see scripts/build-native.mjs').toBeDefined();
  });

  it('runs on a kernel that names the mount on top at a path (statmount, Linux 6.8), which the counts below assume', () => {
    expect(nativeMount()?.topMount('/proc'), 'without statmount each mount made reads the table once more').toMatchObject({ mountPoint: '/proc' });
  });

  it('of a read-only publish: one system call that binds with the flags, and no read of the mount table', async () => {
    const csi = await inProcessCsi(s);
    const id = 'read-only';
    const staging = stagingPath(s.kubeletDir, id);
    const target = targetPath(s.kubeletDir, 'pod-ro', id);
    await csi.call('Controller', 'CreateVolume', { name: id, capacity_range: size(MiB), volume_capabilities: [mountCap()], parameters: { backend: 'dir' } });
    await csi.call('Controller', 'ControllerPublishVolume', { volume_id: id, node_id: 'bench', volume_capability: mountCap() });
    await csi.call('Node', 'NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: mountCap() });
    const publish = { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: mountCap(), readonly: true };
    const { work } = await measure(() => csi.call('Node', 'NodePublishVolume', publish));
    expect(work).toEqual(w([], ['move_mount'], 0, 2, 1, 0));
    expect(mountAt(target)?.mountOptions).toContain('ro');
    await csi.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    await csi.call('Node', 'NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
  });

  it.each([
    ['dir', () => mountCap(), 'dir', MiB],
    ['block', () => mountCap('ext4'), 'block', 64 * MiB],
    ['raw block', () => blockCap(), 'block', 64 * MiB],
  ] as const)('of a %s volume through its node lifecycle, and the reads between', async (kind, cap, backend, bytes) => {
    const csi = await inProcessCsi(s);
    const id = `life-${kind.replace(' ', '-')}`;
    const staging = stagingPath(s.kubeletDir, id);
    const target = targetPath(s.kubeletDir, `pod-${id}`, id);
    const got: Table = {};
    const count = async (service: 'Identity' | 'Controller' | 'Node', method: string, request: object) => {
      got[method] = (await measure(() => csi.call(service, method, request))).work;
    };
    const capability = cap();
    await count('Controller', 'CreateVolume', { name: id, capacity_range: size(bytes), volume_capabilities: [capability], parameters: { backend } });
    await count('Controller', 'ControllerPublishVolume', { volume_id: id, node_id: 'bench', volume_capability: capability });
    await count('Node', 'NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: capability });
    await count('Node', 'NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: capability });
    await count('Node', 'NodeGetVolumeStats', { volume_id: id, volume_path: target });
    await count('Identity', 'Probe', {});
    await count('Controller', 'ControllerGetVolume', { volume_id: id });
    await count('Controller', 'ListVolumes', { max_entries: 100 });
    await count('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    await count('Node', 'NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await count('Controller', 'ControllerUnpublishVolume', { volume_id: id, node_id: 'bench' });
    await count('Controller', 'DeleteVolume', { volume_id: id });
    expect(got).toEqual(CSI_EXPECTED[kind]);
  });

  it("of an exec volume through its node lifecycle: one run of the driver for each call kubelet would make", async () => {
    const pluginDir = join(s.root, 'plugins');
    installDrivers(pluginDir);
    // tmpfs.sh as acme/metrics: its init says supportsMetrics, so NodeGetVolumeStats has usage to give.
    const driver = join(pluginDir, `${VENDOR}~metrics`, 'metrics');
    const csi = await inProcessCsi(s, 'bench', { pluginDir });
    const id = 'life-exec';
    const staging = stagingPath(s.kubeletDir, id);
    const target = targetPath(s.kubeletDir, `pod-${id}`, id);
    const got: Table = {};
    const count = async (service: 'Controller' | 'Node', method: string, request: object) => {
      const { work } = await measure(() => csi.call(service, method, request));
      // The driver by name: its path is this test's scratch.
      got[method] = { ...work, spawns: work.spawns.map((c) => (c === driver ? 'driver' : c)) };
    };
    await count('Controller', 'CreateVolume', { name: id, capacity_range: size(MiB), volume_capabilities: [mountCap()], parameters: { backend: 'exec', driver: `${VENDOR}/metrics` } });
    // The context CreateVolume answered, which a CO sends with each call that describes the volume:
    // the same description, so nothing more is read or locked for it (shared/core/volumes.ts describeVolume).
    const again = await csi.call('Controller', 'CreateVolume', { name: id, capacity_range: size(MiB), volume_capabilities: [mountCap()], parameters: { backend: 'exec', driver: `${VENDOR}/metrics` } });
    const volume_context = v.parse(v.object({ volume: v.object({ volume_context: v.record(v.string(), v.string()) }) }), again).volume.volume_context;
    expect(volume_context).toMatchObject({ backend: 'exec', driver: `${VENDOR}/metrics` });
    await count('Controller', 'ControllerPublishVolume', { volume_id: id, node_id: 'bench', volume_capability: mountCap(), volume_context });
    await count('Node', 'NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: mountCap(), volume_context });
    await count('Node', 'NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: mountCap(), volume_context });
    await count('Node', 'NodeGetVolumeStats', { volume_id: id, volume_path: target });
    await count('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    await count('Node', 'NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await count('Controller', 'ControllerUnpublishVolume', { volume_id: id, node_id: 'bench' });
    await count('Controller', 'DeleteVolume', { volume_id: id });
    expect(got).toEqual(EXEC_EXPECTED);
  });

  it('a block volume made before filesystems were made at create is probed with blkid and formatted at its first stage', async () => {
    const core = coreIn(s, 'bench');
    const id = vid('made-before');
    await createVolume(core, { id, backend: 'block', capacityBytes: 64 * MiB, createdBy: 'csi' });
    // As such a volume is on disk: a blank image, and a record without madeFilesystem.
    const image = core.catalog.imagePath(id);
    truncateSync(image, 0);
    truncateSync(image, 64 * MiB);
    const { madeFilesystem, ...before } = await core.catalog.requireVolume(id);
    expect(madeFilesystem).toBe('ext4');
    await core.catalog.updateVolume(id, () => before);
    const csi = await inProcessCsi(s);
    const staging = stagingPath(s.kubeletDir, id);
    await csi.call('Controller', 'ControllerPublishVolume', { volume_id: id, node_id: 'bench', volume_capability: mountCap() });
    const first = await measure(() => csi.call('Node', 'NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: mountCap() }));
    expect(first.work).toMatchObject({ spawns: ['blkid', 'mkfs.ext4'], systemCalls: ['ioctl', 'mount'] });
    expect(mountAt(staging)?.fsType).toBe('ext4');
    await csi.call('Node', 'NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    const again = await measure(() => csi.call('Node', 'NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: mountCap() }));
    expect(again.work).toMatchObject({ spawns: ['blkid'], systemCalls: ['ioctl', 'mount'] });
    await csi.call('Node', 'NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
  });

  it('node state on a disk keeps its fsync', async () => {
    const disk = createScratch('bench', '/tmp/twinvol-counts-disk-');
    try {
      await createVolume(coreIn(disk, 'bench'), { id: 'on-disk', backend: 'dir', capacityBytes: MiB, createdBy: 'csi' });
      const csi = await inProcessCsi(disk);
      const staging = stagingPath(disk.kubeletDir, 'on-disk');
      await csi.call('Controller', 'ControllerPublishVolume', { volume_id: 'on-disk', node_id: 'bench', volume_capability: mountCap() });
      const { work } = await measure(() => csi.call('Node', 'NodeStageVolume', { volume_id: 'on-disk', staging_target_path: staging, volume_capability: mountCap() }));
      expect(work).toEqual(w([], [], 2, 2, 2, 0));
      await csi.call('Node', 'NodeUnstageVolume', { volume_id: 'on-disk', staging_target_path: staging });
    } finally {
      disk.cleanup();
    }
  });

  it('ListVolumes reads only the records on its page, however many volumes there are', async () => {
    const core = coreIn(s, 'bench');
    for (let i = 0; i < 30; i++) await createVolume(core, { id: `v-${String(i).padStart(2, '0')}`, backend: 'dir', capacityBytes: MiB, createdBy: 'csi' });
    const csi = await inProcessCsi(s);
    const { result, work } = await measure(() => csi.call('Controller', 'ListVolumes', { max_entries: 5 }));
    expect((result as { entries: unknown[] }).entries).toHaveLength(5);
    expect(work).toEqual(w([], [], 0, 5, 0, 0));
  });
});

// Mounts, unmounts and a loop device's binding and release are system calls (shared/native-mount.ts):
// no verb of the lifecycle runs a tool.
const FLEX_EXPECTED: Table = {
  getvolumename: w([], [], 0, 1, 0, 0),
  isattached: w([], [], 0, 1, 0, 0),
  // The first attach of a PV name takes the name's lock and reads its record again under it
  // (shared/core/pv-names.ts); a repeat finds the name its own without either.
  attach: w([], [], 3, 6, 3, 0),
  waitforattach: w([], ['ioctl'], 0, 2, 1, 0),
  'mountdevice (first)': w([], ['mount'], 1, 4, 2, 0),
  mount: w([], ['mount'], 0, 4, 1, 0),
  unmount: w([], ['umount2'], 0, 4, 1, 0),
  unmountdevice: w([], ['umount2', 'ioctl'], 1, 6, 2, 0),
  // unmountdevice let the device go: the next is bound for the mount alone, and the kernel releases
  // it at the unmount (shared/mounter.ts mountImage).
  'mountdevice (again)': w([], ['ioctl', 'mount'], 1, 4, 2, 0),
  'unmountdevice (again)': w([], ['umount2'], 1, 6, 2, 0),
  detach: w([], [], 1, 2, 1, 0),
  // A dir volume binds its directory straight onto the pod's target: no staging to mount or unmount.
  'mount (dir volume)': w([], ['mount'], 2, 4, 2, 0),
  'unmount (dir volume)': w([], ['umount2'], 1, 4, 2, 0),
};

/**
 * What every kind of volume does alike: the controller side and the reads. The node state is on a
 * tmpfs, so its records are written without fsync (shared/store/node-state.ts); the fsyncs left on
 * the node side are the catalog's (the volume's in-use mark). A publish's bind and an unpublish's
 * unmount are one system call each (shared/native-mount.ts), counted as such: no process.
 */
const COMMON: Table = {
  ControllerPublishVolume: w([], [], 1, 2, 1, 0),
  NodePublishVolume: w([], ['mount'], 0, 2, 1, 0),
  NodeGetVolumeStats: w([], [], 0, 3, 0, 0),
  Probe: w([], [], 0, 0, 0, 0),
  ControllerGetVolume: w([], [], 0, 1, 0, 0),
  ListVolumes: w([], [], 0, 1, 0, 0),
  NodeUnpublishVolume: w([], ['umount2'], 0, 4, 1, 0),
  ControllerUnpublishVolume: w([], [], 1, 1, 1, 0),
  DeleteVolume: w([], [], 0, 1, 1, 0),
};

// No call of a lifecycle reads the mount table: whether something is mounted at a path, and which
// mount a mount just made is and what it sits on (shared/mounter.ts requireLanded), are asked of the
// kernel for that one path (shared/mountinfo.ts isMountPoint, topMountAt). A read-only publish is
// one bind made with its flags (native/bind.c); only an addon without that call reads the table, for
// the flags its remount must repeat.
// CreateVolume fsyncs the record and then volumes/, which the volume was renamed into: the create is durable once answered.
const CSI_EXPECTED: Record<'dir' | 'block' | 'raw block', Table> = {
  // A dir volume's staging is its record alone: each publish binds the directory itself.
  dir: { ...COMMON, CreateVolume: w([], [], 2, 1, 1, 0), NodeStageVolume: w([], [], 1, 2, 2, 0), NodeUnstageVolume: w([], [], 1, 5, 2, 0) },
  // The filesystem is made at create, on the image file, and the record says which: no blkid at stage.
  // The stage binds a device for the mount alone (an ioctl) and mounts it; the unmount releases it.
  block: { ...COMMON, CreateVolume: w(['mkfs.ext4'], [], 2, 1, 1, 0), NodeStageVolume: w([], ['ioctl', 'mount'], 1, 2, 2, 0), NodeUnstageVolume: w([], ['umount2'], 1, 5, 2, 0) },
  // Asked for as a raw device only: no filesystem is made for it. Bound and let go by an ioctl each.
  'raw block': { ...COMMON, CreateVolume: w([], [], 2, 1, 1, 0), NodeStageVolume: w([], ['ioctl'], 1, 2, 2, 0), NodeUnstageVolume: w([], ['ioctl'], 1, 5, 2, 0) },
};

// An exec volume (a non-attachable test driver, test/exec/drivers/tmpfs.sh): the driver runs where
// kubelet would run it, once a call, started by posix_spawn (shared/backends/exec-run.ts). Its init
// runs at the first call that needs its capabilities, ControllerPublishVolume here, and not again
// while the file is unchanged. The exec path reads the volume's record to route each call
// (csi/exec-service.ts), hence more reads than a dir volume's; its mounts are the driver's own.
const EXEC_EXPECTED: Table = {
  CreateVolume: w([], [], 2, 1, 1, 0),
  ControllerPublishVolume: w(['driver'], [], 1, 3, 1, 0),
  NodeStageVolume: w([], [], 1, 3, 2, 0),
  NodePublishVolume: w(['driver'], [], 0, 3, 1, 0),
  NodeGetVolumeStats: w([], [], 0, 3, 0, 0),
  NodeUnpublishVolume: w(['driver'], [], 0, 4, 1, 0),
  NodeUnstageVolume: w([], [], 1, 5, 2, 0),
  ControllerUnpublishVolume: w([], [], 1, 1, 1, 0),
  DeleteVolume: w([], [], 0, 1, 1, 0),
};
