import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { readyVolume } from './helpers/pod-mount.js';
import { repeatedOk } from './helpers/repeat.js';
import { mountCap } from './helpers/requests.js';

// NodePublishVolume applies the mount_flags a bind mount can take (through a remount of the bind:
// shared/core/mount-flags.ts), and refuses the others unless the staging already has them. The
// kernel's mountinfo is what is checked.
const csi = useCsiServer({ nodeId: 'node-a' });
const { node } = csi;

const flagged = (mount_flags: string[]) => mountCap('', 'SINGLE_NODE_MULTI_WRITER', { mount_flags });
const optionsAt = (path: string) => mountAt(path)?.mountOptions ?? [];

async function stagedWith(id: string, stageFlags: string[], backend: 'dir' | 'block' = 'dir') {
  const v = await readyVolume(csi, id, { backend, cap: flagged(stageFlags) });
  await node('NodeStageVolume', { volume_id: id, staging_target_path: v.staging, volume_capability: flagged(stageFlags) });
  const publish = (pod: string, flags: string[], readonly = false) =>
    node('NodePublishVolume', { volume_id: id, staging_target_path: v.staging, target_path: v.target(pod), volume_capability: flagged(flags), readonly });
  const release = async (...pods: string[]) => {
    for (const pod of pods) await node('NodeUnpublishVolume', { volume_id: id, target_path: v.target(pod) });
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: v.staging });
  };
  return { ...v, publish, release };
}

describe('NodePublishVolume mount_flags', () => {
  it('applies per-mount flags to the bind; a repeat with other flags for the same target is ALREADY_EXISTS', async () => {
    const v = await stagedWith('pf-dir', []);
    await repeatedOk('NodePublishVolume with flags', () => v.publish('pod-1', ['noexec', 'nosuid', 'nodev', 'noatime']));
    expect(optionsAt(v.target('pod-1'))).toEqual(expect.arrayContaining(['rw', 'noexec', 'nosuid', 'nodev', 'noatime']));
    // The staging the bind was made from keeps its own flags.
    expect(optionsAt(v.staging)).not.toContain('noexec');
    expect(await expectCode(v.publish('pod-1', ['noexec']), 'ALREADY_EXISTS')).toContain('mount flags');
    expect(await expectCode(v.publish('pod-1', []), 'ALREADY_EXISTS')).toContain('mount flags');
    await v.publish('pod-2', ['nosuid'], true);
    expect(optionsAt(v.target('pod-2'))).toEqual(expect.arrayContaining(['ro', 'nosuid']));
    expect(optionsAt(v.target('pod-2'))).not.toContain('noexec');
    await v.release('pod-1', 'pod-2');
  });

  it('refuses a filesystem flag the staging was not made with, and rw on a read-only publish, mounting nothing', async () => {
    const v = await stagedWith('pf-refuse', []);
    expect(await expectCode(v.publish('pod-1', ['noexec', 'discard']), 'INVALID_ARGUMENT')).toContain('mount flag discard');
    expect(await expectCode(v.publish('pod-1', ['rw'], true), 'INVALID_ARGUMENT')).toBe('mount flag rw cannot be applied to a read-only publish');
    expect(mountAt(v.target('pod-1'))).toBeUndefined();
    expect(existsSync(v.target('pod-1'))).toBe(false);
    await v.release();
  });

  it('accepts the filesystem flags the volume was staged with, as kubelet sends the same flags to both', async () => {
    const v = await stagedWith('pf-block', ['discard', 'noexec'], 'block');
    expect(optionsAt(v.staging)).toEqual(expect.arrayContaining(['noexec']));
    await repeatedOk('NodePublishVolume', () => v.publish('pod-1', ['discard', 'noexec']));
    expect(optionsAt(v.target('pod-1'))).toEqual(expect.arrayContaining(['noexec']));
    expect(mountAt(v.target('pod-1'))?.superOptions).toEqual(expect.arrayContaining(['discard']));
    await v.release('pod-1');
  });
});
