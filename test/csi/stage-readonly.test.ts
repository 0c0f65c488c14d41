// A read-only staging (a reader-only access mode, or a node attached read-only) is mounted read-only
// whatever mount_flags the CO sends with it: a block volume's stage gave mount(8) "ro" and then the
// flags, and mount(8) reads its options in order, so a "rw" among them mounted the filesystem
// read-write at the staging path, where the record said read-only.
import { mkdirSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { errnoCode } from '../../shared/errors.js';
import { mountAt } from '../../shared/mountinfo.js';
import { useCsiServer } from './helpers/fixture.js';
import { MiB, mountCap, size, stagingPath } from './helpers/requests.js';

const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;

/** What writing a file at the staging answers: 'written', or the error code. */
function tryWrite(dir: string): string {
  try {
    writeFileSync(`${dir}/written-at-staging`, 'x');
    return 'written';
  } catch (err) {
    return errnoCode(err) ?? String(err);
  }
}

async function stagedReadOnly(id: string, cap: ReturnType<typeof mountCap>, attachedReadOnly: boolean) {
  await ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: csi.flavour.parameters('block', 64 * MiB), capacity_range: size(64 * MiB) });
  await ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap, readonly: attachedReadOnly });
  const staging = stagingPath(csi.s.kubeletDir, id);
  mkdirSync(staging, { recursive: true });
  const release = async () => {
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
  };
  try {
    await node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap });
    return { staging, release };
  } catch (err) {
    await release();
    throw err;
  }
}

describe('a read-only NodeStageVolume with mount_flags rw', () => {
  it('of a reader-only mode mounts the filesystem read-only', async () => {
    const v = await stagedReadOnly('ro-stage-rw', mountCap('', 'SINGLE_NODE_READER_ONLY', { mount_flags: ['rw', 'noatime'] }), false);
    try {
      expect(mountAt(v.staging)?.mountOptions).toContain('ro');
      expect(tryWrite(v.staging)).toBe('EROFS');
    } finally {
      await v.release();
    }
  });

  it('on a node attached read-only mounts the filesystem read-only', async () => {
    const v = await stagedReadOnly('att-ro-stage-rw', mountCap('', 'SINGLE_NODE_WRITER', { mount_flags: ['rw'] }), true);
    try {
      expect(mountAt(v.staging)?.mountOptions).toContain('ro');
      expect(tryWrite(v.staging)).toBe('EROFS');
      // The repeat answers the same: the record keeps the flags as they were asked.
      await node('NodeStageVolume', { volume_id: 'att-ro-stage-rw', staging_target_path: v.staging, volume_capability: mountCap('', 'SINGLE_NODE_WRITER', { mount_flags: ['rw'] }) });
    } finally {
      await v.release();
    }
  });
});

describe('a publish with volume_mount_group from a read-only staging', () => {
  it('answers OK, the group left alone (once INTERNAL on every retry: a chown on a read-only mount)', async () => {
    const v = await stagedReadOnly('ro-stage-group', mountCap('', 'SINGLE_NODE_READER_ONLY'), false);
    const target = `${csi.s.kubeletDir}/pods/p-ro-group/volumes/kubernetes.io~csi/ro-stage-group/mount`;
    mkdirSync(target, { recursive: true });
    try {
      const req = { volume_id: 'ro-stage-group', staging_target_path: v.staging, target_path: target, volume_capability: mountCap('', 'SINGLE_NODE_WRITER', { volume_mount_group: '2000' }) };
      await node('NodePublishVolume', req);
      await node('NodePublishVolume', req);
      expect(tryWrite(target)).toBe('EROFS');
    } finally {
      // A failed publish may leave its bind, for the unpublish to take off (shared/core/publishing.ts).
      await node('NodeUnpublishVolume', { volume_id: 'ro-stage-group', target_path: target });
      await v.release();
    }
  });
});
