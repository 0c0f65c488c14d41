import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { expectCode } from './helpers/client.js';
import { fileSha256, fsTotalBytes, writeRandomFile } from './helpers/data.js';
import { useCsiServer } from './helpers/fixture.js';
import { mountInPod } from './helpers/pod-mount.js';
import { MiB, mountCap, size } from './helpers/requests.js';

/** Snapshots and clones carry data: written through one volume, read back through another. */
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl } = csi;

/** Flushes a mounted filesystem so a copy of its backing image holds what was written. */
const syncfs = (path: string) => execFileSync('sync', ['-f', path]);

describe.each([
  ['ext4', 64 * MiB],
  ['xfs', 320 * MiB],
])('block volumes (%s)', (fsType, bytes) => {
  const cap = mountCap(fsType);
  const id = (name: string) => `${fsType}-${name}`;

  it('restores a snapshot into a larger volume and clones a live one, data checked by sha256', async () => {
    await ctl('CreateVolume', { name: id('src'), volume_capabilities: [cap], capacity_range: size(bytes) });
    const src = await mountInPod(csi, id('src'), cap);
    const original = writeRandomFile(join(src.target, 'payload.bin'));
    syncfs(src.target);

    const snap = await ctl('CreateSnapshot', { name: id('snap'), source_volume_id: id('src') });
    expect(snap.snapshot).toMatchObject({ snapshot_id: id('snap'), source_volume_id: id('src'), size_bytes: String(bytes), ready_to_use: true });
    // After the snapshot, the source moves on: the snapshot must keep the old bytes.
    const changed = writeRandomFile(join(src.target, 'payload.bin'));
    expect(changed).not.toBe(original);
    syncfs(src.target);

    const restored = await ctl('CreateVolume', {
      name: id('restored'),
      volume_capabilities: [cap],
      capacity_range: size(2 * bytes),
      volume_content_source: { snapshot: { snapshot_id: id('snap') } },
    });
    expect(restored.volume.content_source).toEqual({ snapshot: { snapshot_id: id('snap') }, type: 'snapshot' });
    const clone = await ctl('CreateVolume', {
      name: id('clone'),
      volume_capabilities: [cap],
      capacity_range: size(bytes),
      volume_content_source: { volume: { volume_id: id('src') } },
    });
    expect(clone.volume.content_source).toEqual({ volume: { volume_id: id('src') }, type: 'volume' });

    // Both mounted beside the still-mounted source (xfs needs nouuid for that).
    const r = await mountInPod(csi, id('restored'), cap);
    expect(fileSha256(join(r.target, 'payload.bin'))).toBe(original);
    expect(fsTotalBytes(r.target)).toBeGreaterThan(fsTotalBytes(src.target) * 1.8);
    const c = await mountInPod(csi, id('clone'), cap);
    expect(fileSha256(join(c.target, 'payload.bin'))).toBe(changed);

    for (const m of [src, r, c]) await m.release();
    // Snapshots are copies: the source can go and the snapshot still restores.
    await ctl('DeleteVolume', { volume_id: id('src') });
    await ctl('CreateVolume', { name: id('again'), volume_capabilities: [cap], capacity_range: size(bytes), volume_content_source: { snapshot: { snapshot_id: id('snap') } } });
    const again = await mountInPod(csi, id('again'), cap);
    expect(fileSha256(join(again.target, 'payload.bin'))).toBe(original);
    await again.release();
    expect(mountAt(again.target)).toBeUndefined();
  });

  it('grows the filesystem of a copy whose source was grown by the controller and not yet on a node', async () => {
    // The source's image is 2x, its filesystem still 1x until a node stages it: its copies once kept
    // the 1x filesystem for good, since their sizes matched and nothing marked them to grow.
    await ctl('CreateVolume', { name: id('pend'), volume_capabilities: [cap], capacity_range: size(bytes) });
    await ctl('ControllerExpandVolume', { volume_id: id('pend'), capacity_range: size(2 * bytes), volume_capability: cap });
    await ctl('CreateSnapshot', { name: id('pend-snap'), source_volume_id: id('pend') });
    const from = { clone: { volume: { volume_id: id('pend') } }, restored: { snapshot: { snapshot_id: id('pend-snap') } } };
    for (const [name, source] of Object.entries(from)) {
      await ctl('CreateVolume', { name: id(`pend-${name}`), volume_capabilities: [cap], capacity_range: size(2 * bytes), volume_content_source: source });
      const m = await mountInPod(csi, id(`pend-${name}`), cap);
      expect(fsTotalBytes(m.target), name).toBeGreaterThan(bytes * 1.5);
      await m.release();
    }
  });

  it('refuses a restore smaller than the snapshot (OUT_OF_RANGE) or of another filesystem (INVALID_ARGUMENT)', async () => {
    await ctl('CreateVolume', { name: id('small-src'), volume_capabilities: [cap], capacity_range: size(bytes) });
    await ctl('CreateSnapshot', { name: id('small-snap'), source_volume_id: id('small-src') });
    const from = { snapshot: { snapshot_id: id('small-snap') } };
    await expectCode(ctl('CreateVolume', { name: id('too-small'), volume_capabilities: [cap], capacity_range: size(bytes / 2), volume_content_source: from }), 'OUT_OF_RANGE');
    const other = fsType === 'ext4' ? 'xfs' : 'ext4';
    await expectCode(ctl('CreateVolume', { name: id('other-fs'), volume_capabilities: [mountCap(other)], capacity_range: size(bytes), volume_content_source: from }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerGetVolume', { volume_id: id('too-small') }), 'NOT_FOUND');
  });
});

describe('dir volumes', () => {
  const cap = mountCap();
  const dir = { backend: 'dir' };

  it('snapshot and clone copy the whole tree', async () => {
    await ctl('CreateVolume', { name: 'd-src', volume_capabilities: [cap], parameters: dir, capacity_range: size(MiB) });
    const src = await mountInPod(csi, 'd-src', cap);
    mkdirSync(join(src.target, 'sub/deeper'), { recursive: true });
    const top = writeRandomFile(join(src.target, 'top.bin'), 4096);
    const deep = writeRandomFile(join(src.target, 'sub/deeper/deep.bin'), 8192);
    await ctl('CreateSnapshot', { name: 'd-snap', source_volume_id: 'd-src' });
    writeFileSync(join(src.target, 'after-snapshot.txt'), 'later');

    await ctl('CreateVolume', { name: 'd-restored', volume_capabilities: [cap], parameters: dir, capacity_range: size(MiB), volume_content_source: { snapshot: { snapshot_id: 'd-snap' } } });
    await ctl('CreateVolume', { name: 'd-clone', volume_capabilities: [cap], parameters: dir, capacity_range: size(MiB), volume_content_source: { volume: { volume_id: 'd-src' } } });
    const r = await mountInPod(csi, 'd-restored', cap);
    expect(readdirSync(r.target).sort()).toEqual(['sub', 'top.bin']);
    expect(fileSha256(join(r.target, 'top.bin'))).toBe(top);
    expect(fileSha256(join(r.target, 'sub/deeper/deep.bin'))).toBe(deep);
    const c = await mountInPod(csi, 'd-clone', cap);
    expect(readdirSync(c.target).sort()).toEqual(['after-snapshot.txt', 'sub', 'top.bin']);
    for (const m of [src, r, c]) await m.release();
  });

  it('refuses to fill a block volume from a dir snapshot', async () => {
    await ctl('CreateVolume', { name: 'd-src2', volume_capabilities: [cap], parameters: dir, capacity_range: size(MiB) });
    await ctl('CreateSnapshot', { name: 'd-snap2', source_volume_id: 'd-src2' });
    await expectCode(ctl('CreateVolume', { name: 'd-to-block', volume_capabilities: [cap], capacity_range: size(64 * MiB), volume_content_source: { snapshot: { snapshot_id: 'd-snap2' } } }), 'INVALID_ARGUMENT');
  });
});
