// A path's kind as its record says it: a staging path is not a pod's target, and a staging made for
// one access is not published with the other (shared/core/staging.ts requireSameVolume,
// shared/core/publishing.ts bindFromStaging). Apart from test/csi/node.test.ts so that neither passes 400 lines.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { stagedVolume } from './helpers/pod-mount.js';
import { blockCap, MiB, mountCap } from './helpers/requests.js';

const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;

const loopsOf = (id: string) => execFileSync('losetup', ['-j', `${csi.s.dataRoot}/volumes/${id}/image.img`], { encoding: 'utf8' }).trim();

describe('teardown of a path of the other kind', () => {
  it('NodeUnpublishVolume of a staging path and NodeUnstageVolume of a target are INVALID_ARGUMENT, with nothing undone', async () => {
    const v = await stagedVolume(csi, 'kinds', { backend: 'block', cap: blockCap() });
    const target = v.target('p');
    mkdirSync(dirname(target), { recursive: true });
    await node('NodePublishVolume', { volume_id: 'kinds', staging_target_path: v.staging, target_path: target, volume_capability: blockCap() });
    // Once answered OK: the staging's record went without its loop device, which then stayed bound for good.
    expect(await expectCode(node('NodeUnpublishVolume', { volume_id: 'kinds', target_path: v.staging }), 'INVALID_ARGUMENT')).toMatch(/is a staging path of volume kinds, not a pod's target: nothing was changed/);
    expect(await expectCode(node('NodeUnstageVolume', { volume_id: 'kinds', staging_target_path: target }), 'INVALID_ARGUMENT')).toMatch(/is a pod's target of volume kinds, not a staging path/);
    expect(mountAt(target)).toBeDefined();
    await node('NodeUnpublishVolume', { volume_id: 'kinds', target_path: target });
    await node('NodeUnstageVolume', { volume_id: 'kinds', staging_target_path: v.staging });
    await ctl('ControllerUnpublishVolume', { volume_id: 'kinds', node_id: 'node-a' });
    expect(loopsOf('kinds')).toBe('');
    await ctl('DeleteVolume', { volume_id: 'kinds' });
  });
});

describe('a staging published with the other access', () => {
  it('a filesystem staging is not bound raw into a pod: FAILED_PRECONDITION, nothing at the target', async () => {
    const v = await stagedVolume(csi, 'mixed', { backend: 'block', cap: mountCap('ext4') });
    const target = v.target('p');
    mkdirSync(dirname(target), { recursive: true });
    expect(await expectCode(node('NodePublishVolume', { volume_id: 'mixed', staging_target_path: v.staging, target_path: target, volume_capability: blockCap() }), 'FAILED_PRECONDITION')).toMatch(
      /is staged at .* for filesystem access, not raw block access/,
    );
    expect(mountAt(target)).toBeUndefined();
    expect(mountAt(v.staging)?.fsType).toBe('ext4');
    await node('NodeUnstageVolume', { volume_id: 'mixed', staging_target_path: v.staging });
  });
});

describe('asked of a raw block staging and of a volume not grown yet', () => {
  it('NodeGetVolumeStats at a raw block staging reports the device, not a mount that is missing', async () => {
    const v = await stagedVolume(csi, 'raw-stats', { backend: 'block', cap: blockCap() });
    // Once abnormal: "recorded as mounted but the kernel has no mount there", though a raw staging mounts nothing.
    const r = await node('NodeGetVolumeStats', { volume_id: 'raw-stats', volume_path: v.staging });
    expect(r.volume_condition).toEqual({ abnormal: false, message: 'raw block device' });
    // The same path with a trailing slash names the same staging (once NOT_FOUND).
    expect(await node('NodeGetVolumeStats', { volume_id: 'raw-stats', volume_path: `${v.staging}/` })).toEqual(r);
    await node('NodeUnstageVolume', { volume_id: 'raw-stats', staging_target_path: v.staging });
  });

  it('NodeExpandVolume asking for more than the controller has grown is FAILED_PRECONDITION', async () => {
    const v = await stagedVolume(csi, 'grow-first', { backend: 'dir', cap: mountCap() });
    // Once OK with the old size: a CO would take the volume for grown.
    const asked = { volume_id: 'grow-first', volume_path: v.staging, capacity_range: { required_bytes: String(512 * MiB), limit_bytes: '0' } };
    expect(await expectCode(node('NodeExpandVolume', asked), 'FAILED_PRECONDITION')).toMatch(/its controller expansion grows it first/);
    await ctl('ControllerExpandVolume', { volume_id: 'grow-first', capacity_range: { required_bytes: String(512 * MiB), limit_bytes: '0' } });
    expect((await node('NodeExpandVolume', asked)).capacity_bytes).toBe(String(512 * MiB));
    await node('NodeUnstageVolume', { volume_id: 'grow-first', staging_target_path: v.staging });
  });
});

describe('a target or staging path of the wrong shape', () => {
  it('is INVALID_ARGUMENT, named, with nothing published or staged (once INTERNAL: EISDIR, ENOTDIR, EEXIST)', async () => {
    const v = await stagedVolume(csi, 'shapes', { backend: 'block', cap: blockCap() });
    const publishAt = (target: string, cap = blockCap()) => node('NodePublishVolume', { volume_id: 'shapes', staging_target_path: v.staging, target_path: target, volume_capability: cap });
    const dirTarget = v.target('dir');
    mkdirSync(dirTarget, { recursive: true });
    expect(await expectCode(publishAt(dirTarget), 'INVALID_ARGUMENT')).toMatch(/exists and is not a file: a raw block volume is published onto a file/);
    const fileParent = v.target('file-parent');
    mkdirSync(dirname(dirname(fileParent)), { recursive: true });
    writeFileSync(dirname(fileParent), 'a file where a directory belongs');
    expect(await expectCode(publishAt(fileParent), 'INVALID_ARGUMENT')).toMatch(/a part of the path that must be a directory is not one/);
    expect(await expectCode(publishAt(`${dirname(fileParent)}/deeper/x`), 'INVALID_ARGUMENT')).toMatch(/a part of the path that must be a directory is not one/);
    expect(mountAt(dirTarget)).toBeUndefined();
    expect(loopsOf('shapes').split('\n')).toHaveLength(1);
    await node('NodeUnstageVolume', { volume_id: 'shapes', staging_target_path: v.staging });

    const fs = await stagedVolume(csi, 'shapes-fs', { backend: 'dir', cap: mountCap() });
    const fileTarget = fs.target('file');
    mkdirSync(dirname(fileTarget), { recursive: true });
    writeFileSync(fileTarget, '');
    expect(await expectCode(node('NodePublishVolume', { volume_id: 'shapes-fs', staging_target_path: fs.staging, target_path: fileTarget, volume_capability: mountCap() }), 'INVALID_ARGUMENT')).toMatch(/exists and is not a directory/);
    expect(mountAt(fileTarget)).toBeUndefined();
    await node('NodeUnstageVolume', { volume_id: 'shapes-fs', staging_target_path: fs.staging });
  });
});

describe('a repeated publish', () => {
  it('naming another staging path is ALREADY_EXISTS (once OK, leaving the pod on the first staging)', async () => {
    const v = await stagedVolume(csi, 'restage', { backend: 'dir', cap: mountCap() });
    const target = v.target('p');
    mkdirSync(dirname(target), { recursive: true });
    const req = (staging: string) => ({ volume_id: 'restage', staging_target_path: staging, target_path: target, volume_capability: mountCap() });
    await node('NodePublishVolume', req(v.staging));
    await node('NodePublishVolume', req(v.staging));
    const other = `${dirname(v.staging)}/other`;
    expect(await expectCode(node('NodePublishVolume', req(other)), 'ALREADY_EXISTS')).toMatch(/already published at .* from the staging at .*, not .*other/);
    expect(mountAt(target)).toBeDefined();
    await node('NodeUnpublishVolume', { volume_id: 'restage', target_path: target });
    await node('NodeUnstageVolume', { volume_id: 'restage', staging_target_path: v.staging });
  });
});
