import { existsSync, lstatSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { deviceSha256, deviceSize, fileSha256, fsTotalBytes, hasCapSysResource, writeRandomDevice, writeRandomFile } from './helpers/data.js';
import { useCsiServer } from './helpers/fixture.js';
import { repeated, repeatedOk } from './helpers/repeat.js';
import { blockCap, MiB, mountCap, size, stagingPath, targetPath } from './helpers/requests.js';
import { loopsLeftUnder } from '../helpers/scratch.js';
import { loopsBelow, mountsBelow } from './helpers/scratch.js';

/**
 * The whole life of a volume, as csi-sanity drives it: every step repeated ten times with the same
 * answer, data written through the pod's target and checked by sha256 after expansion.
 */
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;

interface Paths {
  staging: string;
  target: string;
}

function pathsFor(id: string): Paths {
  const staging = stagingPath(csi.s.kubeletDir, id);
  const target = targetPath(csi.s.kubeletDir, `pod-${id}`, id);
  // kubelet makes the staging dir and the target's parent; the plugin makes the target itself.
  mkdirSync(staging, { recursive: true });
  mkdirSync(dirname(target), { recursive: true });
  return { staging, target };
}

async function teardown(id: string, p: Paths) {
  await repeatedOk('NodeUnpublishVolume', () => node('NodeUnpublishVolume', { volume_id: id, target_path: p.target }));
  expect(existsSync(p.target)).toBe(false);
  await repeatedOk('NodeUnstageVolume', () => node('NodeUnstageVolume', { volume_id: id, staging_target_path: p.staging }));
  expect(mountAt(p.staging)).toBeUndefined();
  expect(await loopsLeftUnder(join(csi.s.dataRoot, 'volumes', id))).toEqual([]);
  await repeatedOk('ControllerUnpublishVolume', () => ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' }));
  expect((await ctl('ControllerGetVolume', { volume_id: id })).status.published_node_ids).toEqual([]);
  await repeatedOk('DeleteVolume', () => ctl('DeleteVolume', { volume_id: id }));
  expect(existsSync(join(csi.s.dataRoot, 'volumes', id))).toBe(false);
}

async function stageAndPublish(id: string, p: Paths, cap: ReturnType<typeof mountCap>, times: 'repeat' | 'once') {
  const stage = () => node('NodeStageVolume', { volume_id: id, staging_target_path: p.staging, volume_capability: cap });
  const publish = () => node('NodePublishVolume', { volume_id: id, staging_target_path: p.staging, target_path: p.target, volume_capability: cap });
  if (times === 'repeat') {
    await repeatedOk('NodeStageVolume', stage);
    await repeatedOk('NodePublishVolume', publish);
  } else {
    await stage();
    await publish();
  }
}

describe.each([
  ['ext4', 'life-ext4'],
  ['xfs', 'life-xfs'],
])('mount access, %s', (fsType, id) => {
  it('create, publish, stage, publish, write, stats, expand, unpublish, unstage, unpublish, delete', async () => {
    const cap = mountCap(fsType);
    const p = pathsFor(id);
    const created = await repeatedOk('CreateVolume', () => ctl('CreateVolume', { name: id, volume_capabilities: [cap], capacity_range: size(512 * MiB) }));
    expect(created.volume).toMatchObject({ volume_id: id, capacity_bytes: String(512 * MiB), volume_context: { backend: 'block', fsType } });
    expect(await repeatedOk('ControllerPublishVolume', () => ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap }))).toEqual({ publish_context: {} });

    await stageAndPublish(id, p, cap, 'repeat');
    expect(mountAt(p.staging)?.fsType).toBe(fsType);
    expect(mountAt(p.target)?.fsType).toBe(fsType);
    // One mount at the target however often publish was repeated: nothing stacked.
    expect(mountsBelow(dirname(p.target))).toEqual([p.target]);

    const file = join(p.target, 'payload.bin');
    const digest = writeRandomFile(file);
    const stats = await repeatedOk('NodeGetVolumeStats', () => node('NodeGetVolumeStats', { volume_id: id, volume_path: p.target }));
    expect(stats.usage.map((u) => u.unit)).toEqual(['BYTES', 'INODES']);
    const bytes = stats.usage[0]!;
    expect(Number(bytes.total)).toBe(fsTotalBytes(p.target));
    expect(Number(bytes.total)).toBeLessThanOrEqual(512 * MiB);
    expect(Number(bytes.used)).toBeGreaterThanOrEqual(MiB);
    expect(Number(stats.usage[1]?.used)).toBeGreaterThan(0);
    expect(stats.volume_condition).toEqual({ abnormal: false, message: 'volume is healthy' });

    const before = fsTotalBytes(p.target);
    const grown = await repeatedOk('ControllerExpandVolume', () => ctl('ControllerExpandVolume', { volume_id: id, capacity_range: size(1024 * MiB), volume_capability: cap }));
    expect(grown).toEqual({ capacity_bytes: String(1024 * MiB), node_expansion_required: true });
    expect(statSync(join(csi.s.dataRoot, 'volumes', id, 'image.img')).size).toBe(1024 * MiB);
    const expand = () => node('NodeExpandVolume', { volume_id: id, volume_path: p.target, staging_target_path: p.staging, capacity_range: size(1024 * MiB), volume_capability: cap });
    const online = fsType === 'xfs' || hasCapSysResource();
    if (online) {
      expect(await repeatedOk('NodeExpandVolume', expand)).toEqual({ capacity_bytes: String(1024 * MiB) });
      expect(fsTotalBytes(p.target)).toBeGreaterThan(before * 1.8);
    } else {
      // Refused by the kernel here: the same FAILED_PRECONDITION every time, and the filesystem
      // grows offline when the volume is next staged.
      const refused = await repeated('NodeExpandVolume', expand);
      expect(refused.code).toBe('FAILED_PRECONDITION');
      expect(refused.message).toContain('CAP_SYS_RESOURCE');
      expect(fsTotalBytes(p.target)).toBe(before);
      await node('NodeUnpublishVolume', { volume_id: id, target_path: p.target });
      await node('NodeUnstageVolume', { volume_id: id, staging_target_path: p.staging });
      await stageAndPublish(id, p, cap, 'once');
      expect(fsTotalBytes(p.target)).toBeGreaterThan(before * 1.8);
      expect(await repeatedOk('NodeExpandVolume after restage', expand)).toEqual({ capacity_bytes: String(1024 * MiB) });
    }
    expect(fileSha256(file)).toBe(digest);

    await teardown(id, p);
  });
});

describe('raw block access', () => {
  it('create, publish, stage, publish the device, write, stats, expand, unpublish, unstage, unpublish, delete', async () => {
    const id = 'life-raw';
    const cap = blockCap();
    const p = pathsFor(id);
    const created = await repeatedOk('CreateVolume', () => ctl('CreateVolume', { name: id, volume_capabilities: [cap], capacity_range: size(64 * MiB) }));
    expect(created.volume.capacity_bytes).toBe(String(64 * MiB));
    await repeatedOk('ControllerPublishVolume', () => ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap }));

    await stageAndPublish(id, p, cap, 'repeat');
    expect(mountAt(p.staging)).toBeUndefined();
    expect(loopsBelow(join(csi.s.dataRoot, 'volumes', id))).toHaveLength(1);
    expect(lstatSync(p.target).isBlockDevice()).toBe(true);
    expect(deviceSize(p.target)).toBe(64 * MiB);

    const digest = writeRandomDevice(p.target);
    const stats = await repeatedOk('NodeGetVolumeStats', () => node('NodeGetVolumeStats', { volume_id: id, volume_path: p.target }));
    expect(stats.usage).toEqual([{ unit: 'BYTES', total: String(64 * MiB), available: '0', used: '0' }]);

    const grown = await repeatedOk('ControllerExpandVolume', () => ctl('ControllerExpandVolume', { volume_id: id, capacity_range: size(128 * MiB), volume_capability: cap }));
    expect(grown).toEqual({ capacity_bytes: String(128 * MiB), node_expansion_required: true });
    expect(await repeatedOk('NodeExpandVolume', () => node('NodeExpandVolume', { volume_id: id, volume_path: p.target, volume_capability: cap }))).toEqual({
      capacity_bytes: String(128 * MiB),
    });
    expect(deviceSize(p.target)).toBe(128 * MiB);
    expect(deviceSha256(p.target)).toBe(digest);

    await teardown(id, p);
  });
});
