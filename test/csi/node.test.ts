import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { expectCode, outcome } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { type ReadyOptions, readyVolume, stagedVolume } from './helpers/pod-mount.js';
import { repeatedOk } from './helpers/repeat.js';
import { blockCap, MiB, mountCap, size, stagingPath, targetPath } from './helpers/requests.js';
import { loopsLeftUnder } from '../helpers/scratch.js';
import { mountsBelow } from './helpers/scratch.js';
import { treeOf } from './helpers/tree.js';

const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;

const ready = (id: string, opts?: ReadyOptions) => readyVolume(csi, id, opts);
const staged = (id: string, opts?: ReadyOptions) => stagedVolume(csi, id, opts);

/**
 * How NodeGetVolumeStats answers at a staging path (it takes one too): OK while the volume is staged
 * there, NOT_FOUND once it is not. A dir volume's staging is its record alone, so the mount table cannot say.
 */
const statsCodeAt = async (id: string, staging: string) => (await outcome(node('NodeGetVolumeStats', { volume_id: id, volume_path: staging }))).code;

describe('NodeStageVolume', () => {
  it('requires volume id, staging path and capability; an unknown volume is NOT_FOUND', async () => {
    const { staging, cap } = await ready('st-req');
    await expectCode(node('NodeStageVolume', { staging_target_path: staging, volume_capability: cap }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeStageVolume', { volume_id: 'st-req', volume_capability: cap }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeStageVolume', { volume_id: 'st-req', staging_target_path: staging }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeStageVolume', { volume_id: 'no-such', staging_target_path: staging, volume_capability: cap }), 'NOT_FOUND');
    await expectCode(node('NodeUnstageVolume', { staging_target_path: staging }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeUnstageVolume', { volume_id: 'st-req' }), 'INVALID_ARGUMENT');
    expect(mountAt(staging)).toBeUndefined();
  });

  it.each([
    ['outside the kubelet dir', 'st-out-1', () => '/tmp/twinvol-csi-elsewhere/stage'],
    ['escaping with ..', 'st-out-2', () => `${csi.s.kubeletDir}/../escape`],
    ['relative', 'st-out-3', () => 'plugins/x/globalmount'],
    ['the kubelet dir itself', 'st-out-4', () => csi.s.kubeletDir],
  ])('refuses a staging path %s with INVALID_ARGUMENT and writes nothing', async (_what, id, path) => {
    const { cap } = await ready(id);
    const before = treeOf(csi.s.root);
    await expectCode(node('NodeStageVolume', { volume_id: id, staging_target_path: path(), volume_capability: cap }), 'INVALID_ARGUMENT');
    expect(treeOf(csi.s.root)).toEqual(before);
    expect(existsSync('/tmp/twinvol-csi-elsewhere')).toBe(false);
  });

  it('refuses a staging path that leaves the kubelet dir through a symlink', async () => {
    const { cap } = await ready('st-link');
    const outside = join(csi.s.root, 'outside');
    mkdirSync(outside);
    symlinkSync(outside, join(csi.s.kubeletDir, 'link'));
    await expectCode(node('NodeStageVolume', { volume_id: 'st-link', staging_target_path: join(csi.s.kubeletDir, 'link/stage'), volume_capability: cap }), 'INVALID_ARGUMENT');
    expect(readdirSync(outside)).toEqual([]);
    expect(mountsBelow(csi.s.root)).toEqual([]);
  });

  it.each([
    ['source', '/etc', 'st-redir-1'],
    ['path', '/', 'st-redir-2'],
    ['backend', 'static', 'st-redir-3'],
    ['fsType', 'tmpfs', 'st-redir-4'],
    ['Source', '/etc', 'st-redir-5'],
    ['volumeId', 'another-volume', 'st-redir-6'],
  ])('refuses a volume_context %s that would redirect the mount, mounting nothing', async (key, value, id) => {
    const { staging, cap } = await ready(id);
    const before = treeOf(csi.s.dataRoot);
    const msg = await expectCode(node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap, volume_context: { [key]: value } }), 'INVALID_ARGUMENT');
    expect(msg).toContain(`volume_context key "${key}"`);
    expect(mountAt(staging)).toBeUndefined();
    expect(readdirSync(staging)).toEqual([]);
    expect(treeOf(csi.s.dataRoot)).toEqual(before);
  });

  it('accepts a volume_context that repeats what CreateVolume answered, plus the CO\'s own keys', async () => {
    const { staging, cap } = await ready('st-ctx');
    const created = await ctl('CreateVolume', { name: 'st-ctx', volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(64 * MiB) });
    const context = { ...created.volume.volume_context, 'storage.kubernetes.io/csiProvisionerIdentity': '123-csi.twinvol.io' };
    await repeatedOk('NodeStageVolume', () => node('NodeStageVolume', { volume_id: 'st-ctx', staging_target_path: staging, volume_capability: cap, volume_context: context }));
    expect(await statsCodeAt('st-ctx', staging)).toBe('OK');
    await repeatedOk('NodeUnstageVolume', () => node('NodeUnstageVolume', { volume_id: 'st-ctx', staging_target_path: staging }));
    expect(await statsCodeAt('st-ctx', staging)).toBe('NOT_FOUND');
    expect(mountAt(staging)).toBeUndefined();
  });

  it('refuses to stage a volume not published to this node, naming the node that has it', async () => {
    await ctl('CreateVolume', { name: 'st-elsewhere', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const staging = stagingPath(csi.s.kubeletDir, 'st-elsewhere');
    mkdirSync(staging, { recursive: true });
    const req = { volume_id: 'st-elsewhere', staging_target_path: staging, volume_capability: mountCap() };
    expect(await expectCode(node('NodeStageVolume', req), 'FAILED_PRECONDITION')).toContain('not attached to node node-a');
    await csi.registerNodes('node-z');
    await ctl('ControllerPublishVolume', { volume_id: 'st-elsewhere', node_id: 'node-z', volume_capability: mountCap() });
    expect(await expectCode(node('NodeStageVolume', req), 'FAILED_PRECONDITION')).toContain('node node-z');
    expect(mountAt(staging)).toBeUndefined();
  });

  it('refuses a filesystem type other than the volume\'s, and raw block access to a dir volume', async () => {
    const { staging } = await ready('st-fs', { backend: 'block', cap: mountCap('ext4') });
    expect(await expectCode(node('NodeStageVolume', { volume_id: 'st-fs', staging_target_path: staging, volume_capability: mountCap('xfs') }), 'INVALID_ARGUMENT')).toContain('not xfs');
    expect(await loopsLeftUnder(csi.s.root)).toEqual([]);
    const dir = await ready('st-dir-raw');
    await expectCode(node('NodeStageVolume', { volume_id: 'st-dir-raw', staging_target_path: dir.staging, volume_capability: blockCap() }), 'INVALID_ARGUMENT');
    expect(mountsBelow(csi.s.root)).toEqual([]);
  });

  it('applies mount flags, refuses unsafe ones, and treats a re-stage with other flags as ALREADY_EXISTS', async () => {
    const { staging } = await ready('st-flags');
    await expectCode(node('NodeStageVolume', { volume_id: 'st-flags', staging_target_path: staging, volume_capability: mountCap('', 'SINGLE_NODE_WRITER', { mount_flags: ['noexec,suid'] }) }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeStageVolume', { volume_id: 'st-flags', staging_target_path: staging, volume_capability: mountCap('', 'SINGLE_NODE_WRITER', { mount_flags: ['--bind'] }) }), 'INVALID_ARGUMENT');
    expect(mountAt(staging)).toBeUndefined();
    const flagged = mountCap('', 'SINGLE_NODE_WRITER', { mount_flags: ['noexec', 'nosuid'] });
    await repeatedOk('NodeStageVolume with flags', () => node('NodeStageVolume', { volume_id: 'st-flags', staging_target_path: staging, volume_capability: flagged }));
    await expectCode(node('NodeStageVolume', { volume_id: 'st-flags', staging_target_path: staging, volume_capability: mountCap() }), 'ALREADY_EXISTS');
    // A dir volume's staging mounts nothing: its flags reach the pods' binds, even one asking for none.
    const target = targetPath(csi.s.kubeletDir, 'pod-flags', 'st-flags');
    mkdirSync(join(target, '..'), { recursive: true });
    await node('NodePublishVolume', { volume_id: 'st-flags', staging_target_path: staging, target_path: target, volume_capability: mountCap() });
    expect(mountAt(target)?.mountOptions).toEqual(expect.arrayContaining(['noexec', 'nosuid']));
    await node('NodeUnpublishVolume', { volume_id: 'st-flags', target_path: target });
    await node('NodeUnstageVolume', { volume_id: 'st-flags', staging_target_path: staging });
  });

  it('answers OK to unstaging a path that was never staged or is already gone', async () => {
    const never = stagingPath(csi.s.kubeletDir, 'never-staged');
    await repeatedOk('NodeUnstageVolume never staged', () => node('NodeUnstageVolume', { volume_id: 'never-staged', staging_target_path: never }));
    await repeatedOk('NodeUnstageVolume unknown volume', () => node('NodeUnstageVolume', { volume_id: 'no-such-volume', staging_target_path: never }));
  });

  it('refuses to unstage a path in the name of a volume that is not staged there', async () => {
    const { staging } = await staged('st-owner');
    expect(await expectCode(node('NodeUnstageVolume', { volume_id: 'someone-else', staging_target_path: staging }), 'INVALID_ARGUMENT')).toContain('st-owner');
    expect(await statsCodeAt('st-owner', staging)).toBe('OK');
    await node('NodeUnstageVolume', { volume_id: 'st-owner', staging_target_path: staging });
  });
});

describe('NodePublishVolume', () => {
  it('requires volume id, target and capability; a missing staging path is FAILED_PRECONDITION', async () => {
    const { staging, target, cap } = await staged('pb-req');
    const t = target('pod-1');
    await expectCode(node('NodePublishVolume', { staging_target_path: staging, target_path: t, volume_capability: cap }), 'INVALID_ARGUMENT');
    await expectCode(node('NodePublishVolume', { volume_id: 'pb-req', staging_target_path: staging, volume_capability: cap }), 'INVALID_ARGUMENT');
    await expectCode(node('NodePublishVolume', { volume_id: 'pb-req', staging_target_path: staging, target_path: t }), 'INVALID_ARGUMENT');
    await expectCode(node('NodePublishVolume', { volume_id: 'pb-req', target_path: t, volume_capability: cap }), 'FAILED_PRECONDITION');
    await expectCode(node('NodePublishVolume', { volume_id: 'no-such', staging_target_path: staging, target_path: t, volume_capability: cap }), 'NOT_FOUND');
    await expectCode(node('NodeUnpublishVolume', { target_path: t }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeUnpublishVolume', { volume_id: 'pb-req' }), 'INVALID_ARGUMENT');
    expect(existsSync(t)).toBe(false);
    await node('NodeUnstageVolume', { volume_id: 'pb-req', staging_target_path: staging });
  });

  it('refuses targets outside the kubelet dir, creating nothing there', async () => {
    const { staging, cap } = await staged('pb-out');
    for (const t of ['/tmp/twinvol-csi-elsewhere/target', `${csi.s.kubeletDir}/pods/../../escape`, `${csi.s.root}/target`]) {
      await expectCode(node('NodePublishVolume', { volume_id: 'pb-out', staging_target_path: staging, target_path: t, volume_capability: cap }), 'INVALID_ARGUMENT');
      expect(existsSync(t)).toBe(false);
    }
    await expectCode(node('NodePublishVolume', { volume_id: 'pb-out', staging_target_path: '/etc', target_path: targetPath(csi.s.kubeletDir, 'p', 'pb-out'), volume_capability: cap }), 'INVALID_ARGUMENT');
    expect(existsSync(targetPath(csi.s.kubeletDir, 'p', 'pb-out'))).toBe(false);
    await node('NodeUnstageVolume', { volume_id: 'pb-out', staging_target_path: staging });
  });

  it('refuses a volume_context that would redirect the mount, creating no target', async () => {
    const { staging, target, cap } = await staged('pb-redir');
    const t = target('pod-r');
    await expectCode(node('NodePublishVolume', { volume_id: 'pb-redir', staging_target_path: staging, target_path: t, volume_capability: cap, volume_context: { path: '/' } }), 'INVALID_ARGUMENT');
    expect(existsSync(t)).toBe(false);
    await node('NodeUnstageVolume', { volume_id: 'pb-redir', staging_target_path: staging });
  });

  it('answers FAILED_PRECONDITION when the volume is not staged at the staging path given', async () => {
    const { staging, target, cap } = await ready('pb-unstaged');
    await expectCode(node('NodePublishVolume', { volume_id: 'pb-unstaged', staging_target_path: staging, target_path: target('p'), volume_capability: cap }), 'FAILED_PRECONDITION');
    expect(existsSync(target('p'))).toBe(false);
  });

  it('publishes a SINGLE_NODE_SINGLE_WRITER volume at one target only', async () => {
    const cap = mountCap('', 'SINGLE_NODE_SINGLE_WRITER');
    const { staging, target } = await staged('pb-ssw', { cap });
    const req = (pod: string) => ({ volume_id: 'pb-ssw', staging_target_path: staging, target_path: target(pod), volume_capability: cap });
    await repeatedOk('NodePublishVolume', () => node('NodePublishVolume', req('pod-1')));
    expect(await expectCode(node('NodePublishVolume', req('pod-2')), 'FAILED_PRECONDITION')).toContain(target('pod-1'));
    expect(existsSync(target('pod-2'))).toBe(false);
    await node('NodeUnpublishVolume', { volume_id: 'pb-ssw', target_path: target('pod-1') });
    await node('NodePublishVolume', req('pod-2'));
    await node('NodeUnpublishVolume', { volume_id: 'pb-ssw', target_path: target('pod-2') });
    await node('NodeUnstageVolume', { volume_id: 'pb-ssw', staging_target_path: staging });
  });

  it('publishes a SINGLE_NODE_MULTI_WRITER volume at several targets; a re-publish read-only is ALREADY_EXISTS', async () => {
    const cap = mountCap('', 'SINGLE_NODE_MULTI_WRITER');
    const { staging, target } = await staged('pb-smw', { cap });
    const req = (pod: string, readonly = false) => ({ volume_id: 'pb-smw', staging_target_path: staging, target_path: target(pod), volume_capability: cap, readonly });
    await node('NodePublishVolume', req('pod-1'));
    await node('NodePublishVolume', req('pod-2'));
    writeFileSync(join(target('pod-1'), 'shared.txt'), 'from pod 1');
    expect(readFileSync(join(target('pod-2'), 'shared.txt'), 'utf8')).toBe('from pod 1');
    await expectCode(node('NodePublishVolume', req('pod-1', true)), 'ALREADY_EXISTS');
    expect(await expectCode(node('NodeUnstageVolume', { volume_id: 'pb-smw', staging_target_path: staging }), 'FAILED_PRECONDITION')).toContain('still published');
    for (const pod of ['pod-1', 'pod-2']) await node('NodeUnpublishVolume', { volume_id: 'pb-smw', target_path: target(pod) });
    await node('NodeUnstageVolume', { volume_id: 'pb-smw', staging_target_path: staging });
  });

  it('publishes read-only when asked, and gives volume_mount_group ownership of the volume', async () => {
    const { staging, target, cap } = await staged('pb-ro');
    await node('NodePublishVolume', { volume_id: 'pb-ro', staging_target_path: staging, target_path: target('ro'), volume_capability: cap, readonly: true });
    expect(mountAt(target('ro'))?.mountOptions).toContain('ro');
    expect(() => writeFileSync(join(target('ro'), 'x'), 'x')).toThrow(/EROFS/);
    const grouped = mountCap('', 'SINGLE_NODE_WRITER', { volume_mount_group: '4321' });
    await node('NodePublishVolume', { volume_id: 'pb-ro', staging_target_path: staging, target_path: target('rw'), volume_capability: grouped });
    const st = statSync(target('rw'));
    expect(st.gid).toBe(4321);
    expect(st.mode & 0o2070).toBe(0o2070);
    await expectCode(node('NodePublishVolume', { volume_id: 'pb-ro', staging_target_path: staging, target_path: target('bad'), volume_capability: mountCap('', 'SINGLE_NODE_WRITER', { volume_mount_group: 'wheel' }) }), 'INVALID_ARGUMENT');
    for (const pod of ['ro', 'rw']) await node('NodeUnpublishVolume', { volume_id: 'pb-ro', target_path: target(pod) });
    await node('NodeUnstageVolume', { volume_id: 'pb-ro', staging_target_path: staging });
  });

  it('answers OK to unpublishing a target that was never published, and removes it', async () => {
    const t = targetPath(csi.s.kubeletDir, 'pod-never', 'vol-never');
    mkdirSync(t, { recursive: true });
    await repeatedOk('NodeUnpublishVolume never published', () => node('NodeUnpublishVolume', { volume_id: 'vol-never', target_path: t }));
    expect(existsSync(t)).toBe(false);
  });

  it('answers OK to unpublishing a target whose mount was removed by hand, and removes it', async () => {
    const { staging, target, cap } = await staged('pb-hand');
    await node('NodePublishVolume', { volume_id: 'pb-hand', staging_target_path: staging, target_path: target('p'), volume_capability: cap });
    execFileSync('umount', [target('p')]);
    await repeatedOk('NodeUnpublishVolume after a manual umount', () => node('NodeUnpublishVolume', { volume_id: 'pb-hand', target_path: target('p') }));
    expect(existsSync(target('p'))).toBe(false);
    await node('NodeUnstageVolume', { volume_id: 'pb-hand', staging_target_path: staging });
    expect(mountsBelow(csi.s.kubeletDir)).toEqual([]);
  });

  it('mounts a static tmpfs volume with its StorageClass mount options and a 4 KiB volume_context', async () => {
    const cap = mountCap('tmpfs');
    const parameters = { backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: 'size=16m,mode=0755' };
    const created = await ctl('CreateVolume', { name: 'pb-static', volume_capabilities: [cap], parameters });
    expect(created.volume.volume_context).toEqual({ backend: 'static', fsType: 'tmpfs' });
    await ctl('ControllerPublishVolume', { volume_id: 'pb-static', node_id: 'node-a', volume_capability: cap });
    const staging = stagingPath(csi.s.kubeletDir, 'pb-static');
    mkdirSync(staging, { recursive: true });
    const volume_context = { ...created.volume.volume_context, 'csi.storage.k8s.io/pod.name': 'x'.repeat(4000) };
    await node('NodeStageVolume', { volume_id: 'pb-static', staging_target_path: staging, volume_capability: cap, volume_context });
    const m = mountAt(staging);
    expect(m?.fsType).toBe('tmpfs');
    expect(m?.superOptions).toEqual(expect.arrayContaining(['size=16384k', 'mode=755']));
    await node('NodeUnstageVolume', { volume_id: 'pb-static', staging_target_path: staging });
  });

  it('refuses to unpublish a target in the name of another volume', async () => {
    const { staging, target, cap } = await staged('pb-own');
    await node('NodePublishVolume', { volume_id: 'pb-own', staging_target_path: staging, target_path: target('p'), volume_capability: cap });
    await expectCode(node('NodeUnpublishVolume', { volume_id: 'not-me', target_path: target('p') }), 'INVALID_ARGUMENT');
    expect(mountAt(target('p'))).toBeDefined();
    await node('NodeUnpublishVolume', { volume_id: 'pb-own', target_path: target('p') });
    await node('NodeUnstageVolume', { volume_id: 'pb-own', staging_target_path: staging });
  });
});

describe('NodeGetVolumeStats and NodeExpandVolume', () => {
  it('require a volume id and path; unknown volumes and paths where the volume is not are NOT_FOUND', async () => {
    const { staging, target, cap } = await staged('stats-nf');
    await node('NodePublishVolume', { volume_id: 'stats-nf', staging_target_path: staging, target_path: target('p'), volume_capability: cap });
    await expectCode(node('NodeGetVolumeStats', { volume_path: target('p') }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeGetVolumeStats', { volume_id: 'stats-nf' }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeGetVolumeStats', { volume_id: 'no-such', volume_path: target('p') }), 'NOT_FOUND');
    await expectCode(node('NodeGetVolumeStats', { volume_id: 'stats-nf', volume_path: target('other') }), 'NOT_FOUND');
    await expectCode(node('NodeExpandVolume', { volume_path: target('p') }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeExpandVolume', { volume_id: 'stats-nf' }), 'INVALID_ARGUMENT');
    await expectCode(node('NodeExpandVolume', { volume_id: 'no-such', volume_path: target('p') }), 'NOT_FOUND');
    await expectCode(node('NodeExpandVolume', { volume_id: 'stats-nf', volume_path: target('other') }), 'NOT_FOUND');
    // A relative path, a path that does not exist, and another volume's path name nowhere this volume is.
    const other = await staged('stats-other');
    for (const volume_path of ['relative/mount', join(csi.s.kubeletDir, 'no/such/dir'), other.staging]) {
      await expectCode(node('NodeGetVolumeStats', { volume_id: 'stats-nf', volume_path }), 'NOT_FOUND');
      await expectCode(node('NodeExpandVolume', { volume_id: 'stats-nf', volume_path }), 'NOT_FOUND');
    }
    await node('NodeUnstageVolume', { volume_id: 'stats-other', staging_target_path: other.staging });
    const stats = await node('NodeGetVolumeStats', { volume_id: 'stats-nf', volume_path: target('p') });
    expect(stats.usage.map((u) => u.unit)).toEqual(['BYTES', 'INODES']);
    expect(Number(stats.usage[0]?.total)).toBeGreaterThan(0);
    expect(stats.volume_condition).toEqual({ abnormal: false, message: 'volume is healthy' });
    await node('NodeUnpublishVolume', { volume_id: 'stats-nf', target_path: target('p') });
    await expectCode(node('NodeGetVolumeStats', { volume_id: 'stats-nf', volume_path: target('p') }), 'NOT_FOUND');
    // The staging path too: a dir volume's mounts nothing, and answers for the directory its pods bind.
    const atStaging = await node('NodeGetVolumeStats', { volume_id: 'stats-nf', volume_path: staging });
    expect(atStaging.volume_condition).toEqual({ abnormal: false, message: 'volume is healthy' });
    expect(atStaging.usage.map((u) => u.total)).toEqual(stats.usage.map((u) => u.total));
    await node('NodeUnstageVolume', { volume_id: 'stats-nf', staging_target_path: staging });
    await expectCode(node('NodeGetVolumeStats', { volume_id: 'stats-nf', volume_path: staging }), 'NOT_FOUND');
  });

  it('reports a volume whose mount vanished as abnormal', async () => {
    const { staging, target, cap } = await staged('stats-gone');
    await node('NodePublishVolume', { volume_id: 'stats-gone', staging_target_path: staging, target_path: target('p'), volume_capability: cap });
    execFileSync('umount', [target('p')]);
    const stats = await node('NodeGetVolumeStats', { volume_id: 'stats-gone', volume_path: target('p') });
    expect(stats.volume_condition.abnormal).toBe(true);
    expect(stats.volume_condition.message).toContain('kernel has no mount');
    await node('NodeUnpublishVolume', { volume_id: 'stats-gone', target_path: target('p') });
    await node('NodeUnstageVolume', { volume_id: 'stats-gone', staging_target_path: staging });
  });
});

describe('teardown of what twinvol did not make (shared/core/mount-target.ts removeMountPoint)', () => {
  it('NodeUnpublishVolume and NodeUnstageVolume leave a foreign mount and a file with data, and log a warning naming them', async () => {
    const target = targetPath(csi.s.kubeletDir, 'pod-foreign', 'not-ours');
    mkdirSync(target, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'someone-else', target]);
    const file = targetPath(csi.s.kubeletDir, 'pod-file', 'not-ours');
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, 'data');
    const staging = stagingPath(csi.s.kubeletDir, 'not-ours');
    mkdirSync(staging, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'someone-else', staging]);
    try {
      await csi.node('NodeUnpublishVolume', { volume_id: 'not-ours', target_path: target });
      await csi.node('NodeUnpublishVolume', { volume_id: 'not-ours', target_path: file });
      await csi.node('NodeUnstageVolume', { volume_id: 'not-ours', staging_target_path: staging });
      expect(mountAt(target)?.source).toBe('someone-else');
      expect(mountAt(staging)?.source).toBe('someone-else');
      expect(readFileSync(file, 'utf8')).toBe('data');
      const { entries } = await csi.server.logWhen((es) => es.filter((e) => typeof e.warning === 'string').length >= 3);
      const warnings = entries.filter((e) => e.level === 'warn' && typeof e.warning === 'string').map((e) => String(e.warning));
      expect(warnings).toEqual([
        expect.stringContaining(`left ${target} alone: it holds a mount twinvol did not make`),
        expect.stringContaining(`left ${file} alone: a file of 4 bytes`),
        expect.stringContaining(`left ${staging} alone: it holds a mount twinvol did not make`),
      ]);
    } finally {
      execFileSync('umount', [target]);
      execFileSync('umount', [staging]);
    }
  });
});
