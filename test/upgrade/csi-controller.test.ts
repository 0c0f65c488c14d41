// A rolling upgrade of the CSI controller: volumes and snapshots one release made are listed, repeated,
// expanded, restored and deleted by the other, both ways, on one data root (the catalog's records are
// read by both: no schema bump, docs/architecture.md State).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MiB, mountCap, blockCap, size } from '../csi/helpers/requests.js';
import { createCsiScratch, type CsiScratch } from '../csi/helpers/scratch.js';
import { PAIRS, type Release, SKIP_WHY, suiteTitle, useReleases, csiServers } from './releases.js';

let s: CsiScratch;
const servers = csiServers(() => s);
beforeEach(() => {
  s = createCsiScratch('node-a');
});
afterEach(async () => {
  await servers.stop();
  s.cleanup();
});

const serve = async (release: Release) => (await servers.serve(release)).client;

const VOLUMES = [
  { name: 'ctl-dir', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(8 * MiB) },
  { name: 'ctl-ext4', volume_capabilities: [mountCap('ext4')], parameters: { backend: 'block' }, capacity_range: size(32 * MiB) },
  { name: 'ctl-raw', volume_capabilities: [blockCap()], parameters: { backend: 'block' }, capacity_range: size(16 * MiB) },
];
const snapshotOf = (volume: string) => ({ name: `snap-${volume}`, source_volume_id: volume });

const release = useReleases();

describe.skipIf(SKIP_WHY)(suiteTitle('CSI controller across a rolling upgrade'), () => {
  for (const [fromName, toName] of PAIRS) {
    it(`${fromName} creates volumes and snapshots; ${toName} lists, repeats, expands, restores and deletes them`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      const first = await serve(from);
      const made = [];
      for (const v of VOLUMES) made.push((await first.call('Controller', 'CreateVolume', v)).volume);
      const snaps = [];
      for (const v of VOLUMES) snaps.push((await first.call('Controller', 'CreateSnapshot', snapshotOf(v.name))).snapshot);

      const ctl = await serve(to);
      const listed = await ctl.call('Controller', 'ListVolumes', {});
      expect(listed.entries.map((e) => ({ id: e.volume.volume_id, bytes: e.volume.capacity_bytes })).sort((a, b) => a.id.localeCompare(b.id))).toEqual(
        made.map((v) => ({ id: v.volume_id, bytes: v.capacity_bytes })).sort((a, b) => a.id.localeCompare(b.id)),
      );
      // The provisioner repeats a create whose answer it lost (the old controller's pod was replaced meanwhile).
      for (const [i, v] of VOLUMES.entries()) expect((await ctl.call('Controller', 'CreateVolume', v)).volume.volume_id).toBe(made[i]?.volume_id);
      for (const [i, v] of VOLUMES.entries()) expect((await ctl.call('Controller', 'CreateSnapshot', snapshotOf(v.name))).snapshot.snapshot_id).toBe(snaps[i]?.snapshot_id);
      const listedSnaps = await ctl.call('Controller', 'ListSnapshots', {});
      expect(listedSnaps.entries.map((e) => e.snapshot.snapshot_id).sort()).toEqual(snaps.map((x) => x.snapshot_id).sort());
      for (const snap of snaps) expect((await ctl.call('Controller', 'GetSnapshot', { snapshot_id: snap.snapshot_id })).snapshot.source_volume_id).toBe(snap.source_volume_id);

      const grow = await ctl.call('Controller', 'ControllerExpandVolume', { volume_id: 'ctl-ext4', capacity_range: size(64 * MiB), volume_capability: mountCap('ext4') });
      expect(grow).toMatchObject({ capacity_bytes: String(64 * MiB), node_expansion_required: true });
      const dirGrow = await ctl.call('Controller', 'ControllerExpandVolume', { volume_id: 'ctl-dir', capacity_range: size(16 * MiB), volume_capability: mountCap() });
      expect(dirGrow).toMatchObject({ capacity_bytes: String(16 * MiB) });
      const restored = await ctl.call('Controller', 'CreateVolume', {
        name: 'ctl-restored',
        volume_capabilities: [mountCap('ext4')],
        parameters: { backend: 'block' },
        capacity_range: size(32 * MiB),
        volume_content_source: { snapshot: { snapshot_id: 'snap-ctl-ext4' } },
      });
      expect(restored.volume.content_source.snapshot.snapshot_id).toBe('snap-ctl-ext4');

      // The release that made them reads what the other changed.
      const back = await serve(from);
      const sizes = Object.fromEntries((await back.call('Controller', 'ListVolumes', {})).entries.map((e) => [e.volume.volume_id, e.volume.capacity_bytes]));
      expect(sizes).toMatchObject({ 'ctl-ext4': String(64 * MiB), 'ctl-dir': String(16 * MiB), 'ctl-restored': String(32 * MiB) });

      const last = await serve(to);
      for (const snap of snaps) await last.call('Controller', 'DeleteSnapshot', { snapshot_id: snap.snapshot_id });
      for (const id of [...made.map((v) => v.volume_id), 'ctl-restored']) await last.call('Controller', 'DeleteVolume', { volume_id: id });
      expect((await last.call('Controller', 'ListVolumes', {})).entries).toEqual([]);
      expect((await last.call('Controller', 'ListSnapshots', {})).entries).toEqual([]);
    });

    it(`${fromName} cuts a group snapshot; ${toName} repeats it, reads it, restores a member and deletes it`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      const first = await serve(from);
      for (const v of VOLUMES.slice(0, 2)) await first.call('Controller', 'CreateVolume', v);
      const ids = VOLUMES.slice(0, 2).map((v) => v.name);
      const made = (await first.call('GroupController', 'CreateVolumeGroupSnapshot', { name: 'nightly', source_volume_ids: ids })).group_snapshot;
      const ctl = await serve(to);
      // The snapshotter repeats a create whose answer it lost; the source order is not the question.
      const again = (await ctl.call('GroupController', 'CreateVolumeGroupSnapshot', { name: 'nightly', source_volume_ids: [...ids].reverse() })).group_snapshot;
      expect(again.snapshots.map((m) => m.snapshot_id).sort()).toEqual(made.snapshots.map((m) => m.snapshot_id).sort());
      const got = (await ctl.call('GroupController', 'GetVolumeGroupSnapshot', { group_snapshot_id: made.group_snapshot_id })).group_snapshot;
      expect(got.snapshots.map((m) => m.source_volume_id).sort()).toEqual([...ids].sort());
      const member = made.snapshots.find((m) => m.source_volume_id === 'ctl-ext4');
      await ctl.call('Controller', 'CreateVolume', { name: 'ctl-from-group', volume_capabilities: [mountCap('ext4')], parameters: { backend: 'block' }, capacity_range: size(32 * MiB), volume_content_source: { snapshot: { snapshot_id: member?.snapshot_id ?? '' } } });
      await ctl.call('GroupController', 'DeleteVolumeGroupSnapshot', { group_snapshot_id: made.group_snapshot_id, snapshot_ids: made.snapshots.map((m) => m.snapshot_id) });
      expect((await ctl.call('Controller', 'ListSnapshots', {})).entries).toEqual([]);
      for (const id of [...ids, 'ctl-from-group']) await ctl.call('Controller', 'DeleteVolume', { volume_id: id });
    });
  }
});
