import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wrappedTool } from '../helpers/tool-wrapper.js';
import { expectCode, serviceCall } from './helpers/client.js';
import { fileSha256, writeRandomFile } from './helpers/data.js';
import { useCsiServer } from './helpers/fixture.js';
import { mountInPod, type PodMount } from './helpers/pod-mount.js';
import { MiB, mountCap, size, stagingPath } from './helpers/requests.js';

// fsfreeze is logged, so the test sees what was frozen and thawed; cp fails while the flag exists, to
// break a copy halfway through a group (shared/core/group-snapshots.ts).
const tools = mkdtempSync('/tmp/twinvol-test-group-tools-');
const fsfreeze = wrappedTool(tools, 'fsfreeze');
const copyFails = join(tools, 'copy-fails');
const cp = wrappedTool(tools, 'cp', `if [ -e '${copyFails}' ]; then echo 'injected copy failure' >&2; exit 1; fi`);
const csi = useCsiServer({ env: { PATH: `${fsfreeze.dir}:${cp.dir}:/usr/sbin:/usr/bin:/sbin:/bin` } });
const group = serviceCall(() => csi.client, 'GroupController');
const cap = mountCap('ext4');

const pods: PodMount[] = [];
const data: Record<string, string> = {};
beforeAll(async () => {
  for (const id of ['db-data', 'db-log']) {
    await csi.ctl('CreateVolume', { name: id, volume_capabilities: [cap], capacity_range: size(32 * MiB) });
    const pod = await mountInPod(csi, id, cap);
    pods.push(pod);
    data[id] = writeRandomFile(join(pod.target, 'before.bin'));
  }
  await csi.ctl('CreateVolume', { name: 'plain-dir', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
});
afterAll(async () => {
  // A test that failed may have left a staging frozen: unmounting it then would orphan a frozen
  // filesystem that keeps its loop device bound.
  for (const id of ['db-data', 'db-log']) spawnSync('fsfreeze', ['--unfreeze', stagingPath(csi.s.kubeletDir, id)]);
  for (const pod of pods) await pod.release().catch(() => undefined);
  rmSync(tools, { recursive: true, force: true });
});

/** A write to the mount, in a child with a deadline: on a frozen filesystem it would hang. */
function writesWithin(dir: string, ms = 10_000): boolean {
  const r = spawnSync('sh', ['-c', `echo after > '${join(dir, 'after.txt')}' && sync -f '${dir}'`], { timeout: ms });
  return r.status === 0;
}

describe('GroupController', () => {
  it('advertises group snapshots', async () => {
    expect((await group('GroupControllerGetCapabilities')).capabilities.map((c) => c.rpc.type)).toEqual(['CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT']);
  });

  it('cuts every member at one point: each staged filesystem frozen across the copies, then thawed', async () => {
    const before = fsfreeze.calls().length;
    const r = await group('CreateVolumeGroupSnapshot', { name: 'nightly', source_volume_ids: ['db-data', 'db-log', 'plain-dir'], secrets: { token: 's3cret' } });
    const g = r.group_snapshot;
    expect(g.group_snapshot_id).toBe('nightly');
    expect(g.ready_to_use).toBe(true);
    expect(g.snapshots.map((s) => [s.source_volume_id, s.group_snapshot_id, s.ready_to_use])).toEqual([
      ['db-data', 'nightly', true],
      ['db-log', 'nightly', true],
      ['plain-dir', 'nightly', true],
    ]);
    // Both ext4 stagings frozen before any copy and thawed after; the dir volume is not frozen (its
    // filesystem is the data root's, which the copies write to).
    const stagings = ['db-data', 'db-log'].map((id) => stagingPath(csi.s.kubeletDir, id));
    expect(fsfreeze.calls().slice(before)).toEqual([...stagings.map((p) => `--freeze ${p}`), ...stagings.map((p) => `--unfreeze ${p}`)]);
    for (const pod of pods) expect(writesWithin(pod.target)).toBe(true);

    // Each member restores the data written before the cut.
    for (const [i, id] of ['db-data', 'db-log'].entries()) {
      const snapshotId = g.snapshots[i]?.snapshot_id ?? '';
      await csi.ctl('CreateVolume', { name: `${id}-restored`, volume_capabilities: [cap], capacity_range: size(32 * MiB), volume_content_source: { snapshot: { snapshot_id: snapshotId } } });
      const restored = await mountInPod(csi, `${id}-restored`, cap);
      try {
        expect(fileSha256(join(restored.target, 'before.bin'))).toBe(data[id]);
      } finally {
        await restored.release();
      }
      await csi.ctl('DeleteVolume', { volume_id: `${id}-restored` });
    }
  });

  it('answers a repeat with the same group, and the same name for other volumes is ALREADY_EXISTS', async () => {
    const first = (await group('GetVolumeGroupSnapshot', { group_snapshot_id: 'nightly' })).group_snapshot;
    const again = (await group('CreateVolumeGroupSnapshot', { name: 'nightly', source_volume_ids: ['plain-dir', 'db-log', 'db-data'] })).group_snapshot;
    expect(again).toEqual(first);
    expect(await expectCode(group('CreateVolumeGroupSnapshot', { name: 'nightly', source_volume_ids: ['db-data'] }), 'ALREADY_EXISTS')).toContain('db-data, db-log, plain-dir');
  });

  it('keeps members with their group: Get checks the ids given, DeleteSnapshot of a member is refused, ListSnapshots names the group', async () => {
    const g = (await group('GetVolumeGroupSnapshot', { group_snapshot_id: 'nightly' })).group_snapshot;
    const ids = g.snapshots.map((s) => s.snapshot_id);
    expect((await group('GetVolumeGroupSnapshot', { group_snapshot_id: 'nightly', snapshot_ids: [...ids].reverse() })).group_snapshot.group_snapshot_id).toBe('nightly');
    await expectCode(group('GetVolumeGroupSnapshot', { group_snapshot_id: 'nightly', snapshot_ids: ids.slice(1) }), 'FAILED_PRECONDITION');
    await expectCode(group('GetVolumeGroupSnapshot', { group_snapshot_id: 'never-made' }), 'NOT_FOUND');
    expect(await expectCode(csi.ctl('DeleteSnapshot', { snapshot_id: ids[0] ?? '' }), 'FAILED_PRECONDITION')).toContain('belongs to group snapshot nightly');
    const listed = (await csi.ctl('ListSnapshots', {})).entries.map((e) => e.snapshot).filter((s) => s.group_snapshot_id === 'nightly');
    expect(listed.map((s) => s.snapshot_id).sort()).toEqual([...ids].sort());
  });

  it('thaws every frozen filesystem and keeps no member when a copy fails; the retry cuts them all', async () => {
    const before = fsfreeze.calls().length;
    writeFileSync(copyFails, '');
    try {
      expect(await expectCode(group('CreateVolumeGroupSnapshot', { name: 'broken', source_volume_ids: ['db-data', 'db-log'] }), 'INTERNAL')).toContain('injected copy failure');
    } finally {
      rmSync(copyFails, { force: true });
    }
    const calls = fsfreeze.calls().slice(before);
    expect(calls.filter((c) => c.startsWith('--unfreeze')).length).toBe(2);
    expect(calls.filter((c) => c.startsWith('--freeze')).length).toBe(2);
    for (const pod of pods) expect(writesWithin(pod.target)).toBe(true);
    await expectCode(group('GetVolumeGroupSnapshot', { group_snapshot_id: 'broken' }), 'NOT_FOUND');
    expect((await csi.ctl('ListSnapshots', {})).entries.filter((e) => e.snapshot.group_snapshot_id === 'broken')).toEqual([]);

    const retried = (await group('CreateVolumeGroupSnapshot', { name: 'broken', source_volume_ids: ['db-data', 'db-log'] })).group_snapshot;
    expect(retried.snapshots).toHaveLength(2);
    await group('DeleteVolumeGroupSnapshot', { group_snapshot_id: 'broken' });
  });

  it('refuses bad requests with the code that says why, and makes nothing', async () => {
    const cases: [Parameters<typeof group<'CreateVolumeGroupSnapshot'>>[1], string, string][] = [
      [{ name: 'g', source_volume_ids: [] }, 'INVALID_ARGUMENT', 'source_volume_ids is required'],
      [{ name: 'g', source_volume_ids: ['db-data', 'db-data'] }, 'INVALID_ARGUMENT', 'source volume db-data is named twice'],
      [{ name: 'g', source_volume_ids: ['../etc'] }, 'INVALID_ARGUMENT', 'source_volume_ids[0]'],
      [{ name: 'g', source_volume_ids: ['no-such-volume'] }, 'NOT_FOUND', 'no-such-volume'],
      [{ name: 'g', source_volume_ids: ['db-data'], parameters: { surprise: '1' } }, 'INVALID_ARGUMENT', 'surprise'],
    ];
    for (const [request, code, message] of cases) expect(await expectCode(group('CreateVolumeGroupSnapshot', request), code as 'INVALID_ARGUMENT')).toContain(message);
    await expectCode(group('GetVolumeGroupSnapshot', { group_snapshot_id: 'g' }), 'NOT_FOUND');
    await expectCode(group('DeleteVolumeGroupSnapshot', { group_snapshot_id: 'a/b' }), 'INVALID_ARGUMENT');
    await expectCode(group('DeleteVolumeGroupSnapshot', { group_snapshot_id: 'nightly', snapshot_ids: ['not-a-member'] }), 'FAILED_PRECONDITION');
  });

  it('deletes the group with its members, and a repeated delete is fine', async () => {
    const ids = (await group('GetVolumeGroupSnapshot', { group_snapshot_id: 'nightly' })).group_snapshot.snapshots.map((s) => s.snapshot_id);
    await group('DeleteVolumeGroupSnapshot', { group_snapshot_id: 'nightly', snapshot_ids: ids });
    await group('DeleteVolumeGroupSnapshot', { group_snapshot_id: 'nightly' });
    await expectCode(group('GetVolumeGroupSnapshot', { group_snapshot_id: 'nightly' }), 'NOT_FOUND');
    for (const id of ids) await expectCode(csi.ctl('GetSnapshot', { snapshot_id: id }), 'NOT_FOUND');
    const log = csi.server.logLines().join('\n');
    expect(log).toContain('CreateVolumeGroupSnapshot');
    expect(log).not.toContain('s3cret');
  });
});
