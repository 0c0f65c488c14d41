import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Core } from '../../shared/core/core.js';
import { publish, unpublish } from '../../shared/core/publishing.js';
import { stage, unstage } from '../../shared/core/staging.js';
import { attach } from '../../shared/core/attachments.js';
import { type CreateVolumeSpec, createVolume } from '../../shared/core/volumes.js';
import { findLoopDevice } from '../../shared/loop-devices.js';
import { mountAt, readMounts } from '../../shared/mountinfo.js';
import { SCHEMA_VERSION } from '../../shared/store/json-record.js';
import { loopsLeftUnder, mountsUnder, type Scratch } from '../helpers/scratch.js';
import { useScratchCore } from './core-scratch.js';
import { expectRejects } from './expect-error.js';
import { nid, vid } from '../helpers/ids.js';

const MiB = 2 ** 20;

let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

const stagingPath = (pv: string) => join(s.kubeletDir, 'plugins/kubernetes.io/csi/twinvol', pv, 'globalmount');
const targetPath = (pod: string, pv: string) => join(s.kubeletDir, 'pods', pod, 'volumes/kubernetes.io~csi', pv, 'mount');
const mountsAt = (path: string) => readMounts().filter((m) => m.mountPoint === path);

/** A volume as the node side finds it: created, and attached to this node (stage requires that). */
async function attachedVolume(spec: Omit<CreateVolumeSpec, 'createdBy'>) {
  await createVolume(core, { ...spec, createdBy: 'cli' });
  await attach(core, vid(spec.id), nid('node-a'), { readonly: false, via: 'cli' });
}

async function dirVolume(id: string) {
  await attachedVolume({ id, backend: 'dir', capacityBytes: 16 * MiB });
}

describe('dir volume: stage, publish and back', () => {
  it('stages by its record alone and bind-mounts the data dir into targets, read-write and read-only', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    const rw = targetPath('pod-1', 'pv-v');
    const ro = targetPath('pod-2', 'pv-v');

    const staged = await stage(core, vid('v'), staging, { readonly: false });
    expect(staged.device).toBe('');
    expect(mountAt(staging)).toBeUndefined();
    expect(statSync(staging).isDirectory()).toBe(true);
    expect(await core.nodeState.findByPath(staging)).toMatchObject({ kind: 'stage', recordOnly: true });
    // Repeating stage is a no-op.
    await stage(core, vid('v'), staging, { readonly: false });
    expect(mountsAt(staging)).toHaveLength(0);

    await publish(core, vid('v'), rw, { readonly: false, stagingPath: staging, via: 'csi' });
    await publish(core, vid('v'), rw, { readonly: false, stagingPath: staging, via: 'csi' });
    expect(mountsAt(rw)).toHaveLength(1);
    expect(mountAt(rw)?.root).toMatch(/\/volumes\/v\/data$/);
    await publish(core, vid('v'), ro, { readonly: true, stagingPath: staging, via: 'csi' });
    expect(mountAt(ro)?.mountOptions).toContain('ro');

    writeFileSync(join(rw, 'hello.txt'), 'from pod 1');
    expect(readFileSync(join(core.catalog.dataDir('v'), 'hello.txt'), 'utf8')).toBe('from pod 1');
    expect(readFileSync(join(ro, 'hello.txt'), 'utf8')).toBe('from pod 1');
    expect(() => writeFileSync(join(ro, 'nope.txt'), 'x')).toThrow(/EROFS/);

    await expectRejects(publish(core, vid('v'), rw, { readonly: true, stagingPath: staging, via: 'csi' }), 'AlreadyExists', `volume v is already published at ${rw} read-write`);

    expect((await core.nodeState.listForVolume('v')).map((r) => [r.kind, r.path])).toEqual(
      [
        ['stage', staging],
        ['publish', rw],
        ['publish', ro],
      ].sort((a, b) => a[1]!.localeCompare(b[1]!)),
    );

    await unpublish(core, rw);
    await unpublish(core, ro);
    await unpublish(core, ro);
    expect(existsSync(rw)).toBe(false);
    await unstage(core, staging);
    await unstage(core, staging);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
    expect(await core.nodeState.listAll()).toEqual([]);
    // The data outlives the mounts.
    expect(readFileSync(join(core.catalog.dataDir('v'), 'hello.txt'), 'utf8')).toBe('from pod 1');
  });

  it('refuses to unstage while still published, naming the target', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    const target = targetPath('pod-1', 'pv-v');
    await stage(core, vid('v'), staging, { readonly: false });
    await publish(core, vid('v'), target, { readonly: false, stagingPath: staging, via: 'csi' });
    await expectRejects(unstage(core, staging), 'FailedPrecondition', `volume v is still published at ${target}`);
    expect(await core.nodeState.findByPath(staging)).toBeDefined();
    expect(mountAt(target)).toBeDefined();
  });

  it("publishes with what a mounted staging would have passed on: its read-only flag and bind flags, then the publish's", async () => {
    await dirVolume('v');
    const roStaging = stagingPath('pv-ro');
    await stage(core, vid('v'), roStaging, { readonly: true, mountFlags: ['noexec', 'nosuid'] });
    const target = targetPath('pod-1', 'pv-v');
    await publish(core, vid('v'), target, { readonly: false, stagingPath: roStaging, via: 'csi', mountFlags: ['exec'] });
    const options = mountAt(target)?.mountOptions ?? [];
    expect(options).toEqual(expect.arrayContaining(['ro', 'nosuid']));
    // The publish's own flag comes after the staging's, and wins.
    expect(options).not.toContain('noexec');
    // A filesystem flag the staging was not made with is refused, as from a mounted staging.
    await expectRejects(
      publish(core, vid('v'), targetPath('pod-2', 'pv-v'), { readonly: false, stagingPath: roStaging, via: 'csi', mountFlags: ['sync'] }),
      'InvalidArgument',
      'mount flag sync cannot be applied to a bind mount',
    );
    expect(existsSync(targetPath('pod-2', 'pv-v'))).toBe(false);
  });

  it('binds the data dir at the staging when its caller needs a mount point there (FlexVolume mountdevice), and publishes from it', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    await stage(core, vid('v'), staging, { readonly: false, mountPoint: true });
    expect(mountAt(staging)?.root).toMatch(/\/volumes\/v\/data$/);
    expect((await core.nodeState.findByPath(staging))?.recordOnly).toBeUndefined();
    await stage(core, vid('v'), staging, { readonly: false, mountPoint: true });
    expect(mountsAt(staging)).toHaveLength(1);
    const target = targetPath('pod-1', 'pv-v');
    await publish(core, vid('v'), target, { readonly: false, via: 'flex' });
    writeFileSync(join(target, 'a.txt'), 'a');
    expect(readFileSync(join(staging, 'a.txt'), 'utf8')).toBe('a');
    await unpublish(core, target);
    await unstage(core, staging);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
    expect(await core.nodeState.listAll()).toEqual([]);
  });

  it('refuses to publish from a staging path that was never staged', async () => {
    await dirVolume('v');
    await expectRejects(
      publish(core, vid('v'), targetPath('pod-1', 'pv-v'), { readonly: false, stagingPath: stagingPath('pv-v'), via: 'csi' }),
      'FailedPrecondition',
      `volume v is not staged at ${stagingPath('pv-v')} on this node`,
    );
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
  });
});

describe('block volume: stage, publish and back', () => {
  it('attaches a loop device, formats ext4 once, mounts, publishes, and releases the device at unstage', async () => {
    await attachedVolume({ id: 'b', backend: 'block', capacityBytes: 64 * MiB });
    const staging = stagingPath('pv-b');
    const target = targetPath('pod-1', 'pv-b');

    const { device } = await stage(core, vid('b'), staging, { readonly: false });
    expect(device).toMatch(/^\/dev\/loop\d+$/);
    expect(findLoopDevice(core.catalog.imagePath('b'))).toBe(device);
    expect(mountAt(staging)).toMatchObject({ source: device, fsType: 'ext4' });

    await publish(core, vid('b'), target, { readonly: false, stagingPath: staging, via: 'csi' });
    expect(mountAt(target)).toMatchObject({ source: device, fsType: 'ext4' });
    writeFileSync(join(target, 'data.txt'), 'kept');

    await unpublish(core, target);
    await unstage(core, staging);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
    // The kernel lets go of a loop device a moment after losetup -d when its filesystem was just
    // unmounted: waited for with a deadline (a look at once failed here once under load).
    expect(await loopsLeftUnder(s.root)).toEqual([]);

    // Staged again: the filesystem is mounted as it was, not reformatted.
    await stage(core, vid('b'), staging, { readonly: false });
    expect(readFileSync(join(staging, 'data.txt'), 'utf8')).toBe('kept');
    await unstage(core, staging);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });
});

describe('static volume', () => {
  it('mounts its source with its type and options, read-only when asked', async () => {
    await attachedVolume({ id: 't', backend: 'static', capacityBytes: 0, source: 'tmpfs', fsType: 'tmpfs', mountOptions: 'size=8m' });
    const staging = stagingPath('pv-t');
    await stage(core, vid('t'), staging, { readonly: true });
    expect(mountAt(staging)).toMatchObject({ fsType: 'tmpfs', source: 'tmpfs' });
    expect(mountAt(staging)?.superOptions).toContain('size=8192k');
    expect(mountAt(staging)?.mountOptions).toContain('ro');
    await unstage(core, staging);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
  });

  it('is read-only when asked, whatever rw its options hold after a ro', async () => {
    // mount(8) reads options in order: a later rw undid the ro the stage added only where none was.
    await attachedVolume({ id: 'u', backend: 'static', capacityBytes: 0, source: 'tmpfs', fsType: 'tmpfs', mountOptions: 'ro,size=8m,rw' });
    const staging = stagingPath('pv-u');
    await stage(core, vid('u'), staging, { readonly: true });
    expect(mountAt(staging)?.mountOptions).toContain('ro');
    await unstage(core, staging);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
  });
});

describe('foreign mounts and crash recovery', () => {
  it('finishes an fsGroup walk a crash cut short, and applies a new group on a later publish', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    const target = targetPath('pod-g', 'pv-v');
    await stage(core, vid('v'), staging, { readonly: false });
    const data = core.catalog.dataDir('v');
    for (let i = 0; i < 50; i++) writeFileSync(join(data, `f${i}`), 'x');
    await publish(core, vid('v'), target, { readonly: false, stagingPath: staging, via: 'flex', fsGroup: 2000 });
    const groups = () => new Set(readdirSync(data).map((n) => statSync(join(data, n)).gid));
    expect(groups()).toEqual(new Set([2000]));

    // The crash: the bind and the intent are there, the walk reached only part of the tree.
    for (let i = 0; i < 30; i++) chownSync(join(data, `f${i}`), 0, 0);
    const record = (await core.nodeState.findByPath(target))!;
    await core.nodeState.put({ ...record, fsGroupApplied: undefined });
    await publish(core, vid('v'), target, { readonly: false, stagingPath: staging, via: 'flex', fsGroup: 2000 });
    expect(groups()).toEqual(new Set([2000]));
    expect((await core.nodeState.findByPath(target))?.fsGroupApplied).toBe(2000);

    await publish(core, vid('v'), target, { readonly: false, stagingPath: staging, via: 'flex', fsGroup: 3000 });
    expect(groups()).toEqual(new Set([3000]));
    await unpublish(core, target);
    await unstage(core, staging);
  });

  it('refuses to stage over a mount twinvol did not make, stacking nothing', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    mkdirSync(staging, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'foreign', staging]);
    await expectRejects(stage(core, vid('v'), staging, { readonly: false }), 'AlreadyExists', `${staging} already holds a mount twinvol did not make: foreign (tmpfs)`);
    expect(mountsAt(staging).map((m) => [m.fsType, m.source])).toEqual([['tmpfs', 'foreign']]);
    expect(await core.nodeState.findByPath(staging)).toBeUndefined();
  });

  it('refuses to publish over a mount twinvol did not make', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    const target = targetPath('pod-1', 'pv-v');
    await stage(core, vid('v'), staging, { readonly: false });
    mkdirSync(target, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'foreign', target]);
    await expectRejects(publish(core, vid('v'), target, { readonly: false, stagingPath: staging, via: 'csi' }), 'AlreadyExists', 'already holds a mount twinvol did not make');
    expect(mountsAt(target).map((m) => m.source)).toEqual(['foreign']);
    expect(await core.nodeState.findByPath(target)).toBeUndefined();
  });

  it('refuses a staging path another volume is recorded at', async () => {
    await dirVolume('v1');
    await dirVolume('v2');
    const staging = stagingPath('shared');
    await stage(core, vid('v1'), staging, { readonly: false });
    await expectRejects(stage(core, vid('v2'), staging, { readonly: false }), 'AlreadyExists', `${staging} is already used by volume v1`);
    await expectRejects(stage(core, vid('v1'), staging, { readonly: true }), 'AlreadyExists', 'already staged at');
    expect((await core.nodeState.listAll()).map((r) => [r.volumeId, r.path])).toEqual([['v1', staging]]);
  });

  it('completes a stage whose record was written but whose mount never happened', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    // A staging that is a mount (FlexVolume's, or any an earlier twinvol made of a dir volume).
    await core.nodeState.put({ schema: SCHEMA_VERSION, volumeId: vid('v'), path: staging, kind: 'stage', readonly: false, createdAt: new Date().toISOString() });
    expect(mountAt(staging)).toBeUndefined();
    await stage(core, vid('v'), staging, { readonly: false });
    expect(mountAt(staging)?.root).toMatch(/\/volumes\/v\/data$/);
    expect(mountsAt(staging)).toHaveLength(1);
    expect((await core.nodeState.listForVolume('v')).map((r) => r.path)).toEqual([staging]);
  });

  it('unpublish answers OK and drops the record when the mount was removed by hand', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    const target = targetPath('pod-1', 'pv-v');
    await stage(core, vid('v'), staging, { readonly: false });
    await publish(core, vid('v'), target, { readonly: false, stagingPath: staging, via: 'csi' });
    execFileSync('umount', [target]);
    await unpublish(core, target);
    expect(await core.nodeState.findByPath(target)).toBeUndefined();
    expect(existsSync(target)).toBe(false);
    // With the publish gone, unstage is allowed.
    await unstage(core, staging);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
    expect(await core.nodeState.listAll()).toEqual([]);
  });

  it('unstage drops publish records whose mounts are gone instead of refusing', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    const target = targetPath('pod-1', 'pv-v');
    await stage(core, vid('v'), staging, { readonly: false });
    await publish(core, vid('v'), target, { readonly: false, stagingPath: staging, via: 'csi' });
    execFileSync('umount', [target]);
    await unstage(core, staging);
    expect(await core.nodeState.listAll()).toEqual([]);
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
  });

  it('unpublish of a path never mounted, existing or not, answers OK', async () => {
    const target = targetPath('pod-9', 'pv-x');
    await unpublish(core, target);
    mkdirSync(target, { recursive: true });
    await unpublish(core, target);
    expect(existsSync(target)).toBe(false);
    await unstage(core, stagingPath('never'));
  });
});

describe('paths outside the kubelet dir', () => {
  it('refuses a target that is a symlink leading outside, mounting nothing there', async () => {
    await dirVolume('v');
    const staging = stagingPath('pv-v');
    await stage(core, vid('v'), staging, { readonly: false });
    const outside = join(s.root, 'outside');
    mkdirSync(outside);
    const podDir = join(s.kubeletDir, 'pods', 'evil');
    mkdirSync(podDir, { recursive: true });
    // The target itself is the link...
    symlinkSync(outside, join(podDir, 'mount'));
    await expectRejects(publish(core, vid('v'), join(podDir, 'mount'), { readonly: false, stagingPath: staging, via: 'csi' }), 'InvalidArgument', 'resolves outside');
    // ...or a directory on the way to it is.
    symlinkSync(outside, join(podDir, 'dir-link'));
    await expectRejects(publish(core, vid('v'), join(podDir, 'dir-link', 'sub', 'mount'), { readonly: false, stagingPath: staging, via: 'csi' }), 'InvalidArgument', 'resolves outside');
    expect(mountsUnder(outside)).toEqual([]);
    expect(readdirSync(outside)).toEqual([]);
    expect(await core.nodeState.listForVolume('v')).toHaveLength(1);
    // Nor is a staging path through such a link accepted, or unmounted.
    await expectRejects(stage(core, vid('v'), join(podDir, 'dir-link', 'stage'), { readonly: false }), 'InvalidArgument', 'resolves outside');
    await expectRejects(unpublish(core, join(podDir, 'mount')), 'InvalidArgument', 'resolves outside');
    expect(mountsUnder(outside)).toEqual([]);
  });

  it('leaves no target behind when a publish fails (here: the volume is not staged where it says)', async () => {
    await dirVolume('v');
    const target = targetPath('pod-f', 'pv-v');
    await expectRejects(publish(core, vid('v'), target, { readonly: false, stagingPath: stagingPath('pv-v'), via: 'csi' }), 'FailedPrecondition', 'is not staged');
    expect(existsSync(target)).toBe(false);
    expect(await core.nodeState.listForVolume('v')).toEqual([]);
  });

  it('refuses targets that are outside or not normalised before looking at the disk', async () => {
    await dirVolume('v');
    await expectRejects(publish(core, vid('v'), join(s.root, 'elsewhere'), { readonly: false, via: 'flex' }), 'InvalidArgument', 'is outside');
    await expectRejects(publish(core, vid('v'), `${s.kubeletDir}/pods/../../x`, { readonly: false, via: 'flex' }), 'InvalidArgument', 'is not a normalised path');
    await expectRejects(stage(core, vid('v'), s.kubeletDir, { readonly: false }), 'InvalidArgument', 'is outside');
    expect(existsSync(join(s.root, 'elsewhere'))).toBe(false);
  });
});

describe('a node the volume is attached to read-only', () => {
  it('keeps answering a staging and a publish made read-write before the attachment held it to reading', async () => {
    await dirVolume('held');
    const staging = stagingPath('pv-held');
    const target = targetPath('pod-h', 'pv-held');
    await stage(core, vid('held'), staging, { readonly: false });
    await publish(core, vid('held'), target, { readonly: false, via: 'csi' });
    // As an older twinvol left them: read-write mounts beside an attachment recorded read-only.
    await core.catalog.updateVolume('held', (v) => ({ ...v, attachments: v.attachments.map((a) => ({ ...a, readonly: true })) }));
    // kubelet's repeats ask what they asked before: the same answer, not AlreadyExists.
    await stage(core, vid('held'), staging, { readonly: false });
    await publish(core, vid('held'), target, { readonly: false, via: 'csi' });
    // A new publish is held to reading.
    const other = targetPath('pod-i', 'pv-held');
    await publish(core, vid('held'), other, { readonly: false, via: 'csi' });
    expect(() => writeFileSync(join(other, 'f'), 'x')).toThrow(/EROFS/);
    for (const t of [target, other]) await unpublish(core, t);
    await unstage(core, staging);
  });
});
