import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { attach, detach } from '../../shared/core/attachments.js';
import type { Core } from '../../shared/core/core.js';
import { createVolume, type CreateVolumeSpec, deleteVolume, expandVolume, listVolumes } from '../../shared/core/volumes.js';
import { nodeAttach } from '../../shared/core/staging.js';
import { findLoopDevice } from '../../shared/loop-devices.js';
import type { Scratch } from '../helpers/scratch.js';
import { useScratchCore } from './core-scratch.js';
import { expectRejects } from './expect-error.js';
import { nid, unchecked, vid } from '../helpers/ids.js';
import type { NodeId, VolumeId } from '../../shared/validate.js';

const MiB = 2 ** 20;

let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

const block = (id: string, extra: Partial<CreateVolumeSpec> = {}): CreateVolumeSpec => ({ id, backend: 'block', capacityBytes: 64 * MiB, createdBy: 'cli', ...extra });
const dir = (id: string, extra: Partial<CreateVolumeSpec> = {}): CreateVolumeSpec => ({ id, backend: 'dir', capacityBytes: 16 * MiB, createdBy: 'cli', ...extra });
const tmpfs = (id: string, extra: Partial<CreateVolumeSpec> = {}): CreateVolumeSpec => ({
  id,
  backend: 'static',
  capacityBytes: 0,
  source: 'tmpfs',
  fsType: 'tmpfs',
  mountOptions: 'size=8m,mode=0755',
  createdBy: 'cli',
  ...extra,
});
const workLeftovers = () => (existsSync(join(s.dataRoot, '.work')) ? readdirSync(join(s.dataRoot, '.work')) : []);

describe('createVolume', () => {
  it('creates a block volume as a sparse image of the requested size', async () => {
    const { volume, created } = await createVolume(core, block('blk-1'));
    expect(created).toBe(true);
    expect(volume).toMatchObject({ id: 'blk-1', backend: 'block', capacityBytes: 64 * MiB, fsType: 'ext4', access: 'single-node', attachments: [] });
    const st = statSync(core.catalog.imagePath('blk-1'));
    expect(st.size).toBe(64 * MiB);
    // Sparse: far fewer bytes allocated than the apparent size.
    expect(st.blocks * 512).toBeLessThan(MiB);
    expect(st.mode & 0o777).toBe(0o600);
    expect(await core.catalog.getVolume('blk-1')).toEqual(volume);
    expect(workLeftovers()).toEqual([]);
  });

  it('uses the requested fsType, and refuses unsupported ones', async () => {
    expect((await createVolume(core, block('blk-x', { fsType: 'xfs', capacityBytes: 300 * MiB }))).volume.fsType).toBe('xfs');
    await expectRejects(createVolume(core, block('blk-b', { fsType: 'btrfs' })), 'InvalidArgument', 'fsType "btrfs" is not supported');
    expect(await core.catalog.getVolume('blk-b')).toBeUndefined();
  });

  // mkfs.xfs (xfsprogs 6.1) refuses below 300 MiB: refused before any file is made. (mkfs.ext4's floor,
  // 104 KiB, is below the 1 MiB a block size rounds up to.)
  it.each([
    ['xfs', 299 * MiB, /too small for xfs: mkfs.xfs refuses a filesystem smaller than 300 MiB; ask for at least 300Mi/],
  ])('refuses a blank %s volume below what mkfs formats', async (fsType, capacityBytes, reason) => {
    await expectRejects(createVolume(core, block('blk-small', { fsType, capacityBytes })), 'InvalidArgument', reason);
    expect(await core.catalog.getVolume('blk-small')).toBeUndefined();
    expect(workLeftovers()).toEqual([]);
  });

  it('creates a dir volume as a world-writable data directory', async () => {
    const { volume, created } = await createVolume(core, dir('dir-1'));
    expect(created).toBe(true);
    expect(volume).toMatchObject({ backend: 'dir', fsType: '', capacityBytes: 16 * MiB });
    const st = statSync(core.catalog.dataDir('dir-1'));
    expect(st.isDirectory()).toBe(true);
    expect(st.mode & 0o777).toBe(0o777);
    expect(readdirSync(core.catalog.dataDir('dir-1'))).toEqual([]);
  });

  it('creates a static tmpfs volume with its source, type and options (no size needed)', async () => {
    const { volume, created } = await createVolume(core, tmpfs('st-1'));
    expect(created).toBe(true);
    expect(volume).toMatchObject({ backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: ['size=8m', 'mode=0755'], capacityBytes: 0 });
    expect(readdirSync(core.catalog.volumeDir('st-1'))).toEqual(['volume.json']);
  });

  it('compares parameters as a map: the same keys in another order are the same spec (protobuf maps keep no order)', async () => {
    await createVolume(core, dir('p', { parameters: { backend: 'dir', team: 'a' } }));
    const again = await createVolume(core, dir('p', { parameters: { team: 'a', backend: 'dir' } }));
    expect(again.created).toBe(false);
    await expectRejects(createVolume(core, dir('p', { parameters: { team: 'b', backend: 'dir' } })), 'AlreadyExists', 'parameters');
  });

  it('answers created:false with the existing record when the same spec is asked again', async () => {
    for (const spec of [block('blk-1'), dir('dir-1'), tmpfs('st-1')]) {
      const first = await createVolume(core, spec);
      const again = await createVolume(core, spec);
      expect(again.created).toBe(false);
      expect(again.volume).toEqual(first.volume);
    }
    expect(await core.catalog.listVolumeIds()).toEqual(['blk-1', 'dir-1', 'st-1']);
  });

  it('answers AlreadyExists naming the difference when the spec differs', async () => {
    await createVolume(core, block('v'));
    await expectRejects(createVolume(core, block('v', { capacityBytes: 128 * MiB })), 'AlreadyExists', `volume v already exists with another spec (size ${64 * MiB} bytes)`);
    await expectRejects(createVolume(core, dir('v', { capacityBytes: 64 * MiB })), 'AlreadyExists', '(backend block, fsType ext4)');
    await expectRejects(createVolume(core, block('v', { fsType: 'xfs' })), 'AlreadyExists', '(fsType ext4)');
    await createVolume(core, dir('d'));
    await expectRejects(createVolume(core, dir('d', { access: 'multi-node' })), 'AlreadyExists', '(access single-node)');
    await expectRejects(createVolume(core, block('v', { parameters: { tier: 'fast' } })), 'AlreadyExists', '(parameters)');
    await createVolume(core, tmpfs('t'));
    await expectRejects(createVolume(core, tmpfs('t', { mountOptions: 'size=16m' })), 'AlreadyExists', '(mountOptions)');
    await expectRejects(createVolume(core, tmpfs('t', { source: 'none' })), 'AlreadyExists', '(source)');
    // The first records are untouched.
    expect((await core.catalog.requireVolume('v')).capacityBytes).toBe(64 * MiB);
    expect(statSync(core.catalog.imagePath('v')).size).toBe(64 * MiB);
  });

  it('refuses bad specs before anything reaches the disk', async () => {
    await expectRejects(createVolume(core, block('v', { capacityBytes: 0 })), 'InvalidArgument', 'a block volume needs a size');
    await expectRejects(createVolume(core, dir('v', { capacityBytes: 1.5 })), 'InvalidArgument', 'capacity must be a whole number of bytes');
    await expectRejects(createVolume(core, block('v', { capacityBytes: -1 })), 'InvalidArgument', 'capacity');
    await expectRejects(createVolume(core, { ...dir('v'), backend: 'nfs' }), 'InvalidArgument', 'backend "nfs" is unknown');
    await expectRejects(createVolume(core, dir('v', { source: '/x' })), 'InvalidArgument', 'source and mountOptions belong to static volumes');
    await expectRejects(createVolume(core, tmpfs('v', { source: '/a/../b' })), 'InvalidArgument', 'is not a valid mount source');
    await expectRejects(createVolume(core, tmpfs('v', { mountOptions: 'size=8m,exec;x' })), 'InvalidArgument', 'is not allowed');
    await expectRejects(createVolume(core, dir('../v')), 'InvalidArgument', 'volume id');
    // An exec volume's every call runs its driver: without one it could only fail them all.
    await expectRejects(createVolume(core, { id: 'v', backend: 'exec', capacityBytes: 0, createdBy: 'flex' }), 'InvalidArgument', 'parameter driver');
    await expectRejects(createVolume(core, { id: 'v', backend: 'exec', capacityBytes: 0, parameters: { driver: '../x' }, createdBy: 'csi' }), 'InvalidArgument', 'parameter driver');
    // Access against backend: a block volume's filesystem is mounted by one node at a time.
    await expectRejects(createVolume(core, block('v', { access: 'multi-node' })), 'InvalidArgument', 'one node at a time can mount');
    expect(existsSync(join(s.dataRoot, 'volumes'))).toBe(false);
  });

  it('lists what exists', async () => {
    await createVolume(core, dir('b'));
    await createVolume(core, block('a'));
    expect((await listVolumes(core)).volumes.map((v) => v.id)).toEqual(['a', 'b']);
  });
});

describe('deleteVolume', () => {
  it('refuses while attached, naming the node, and works after detach', async () => {
    await createVolume(core, dir('v', { access: 'multi-node' }));
    await attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'cli' });
    await attach(core, vid('v'), nid('node-b'), { readonly: true, via: 'csi' });
    await expectRejects(deleteVolume(core, vid('v')), 'FailedPrecondition', 'volume v is still attached to node node-a, node node-b');
    await detach(core, vid('v'), nid('node-a'));
    await expectRejects(deleteVolume(core, vid('v')), 'FailedPrecondition', /still attached to node node-b$/);
    expect(existsSync(core.catalog.dataDir('v'))).toBe(true);
    await detach(core, vid('v'), nid('node-b'));
    await deleteVolume(core, vid('v'));
    expect(existsSync(core.catalog.volumeDir('v'))).toBe(false);
    expect(await core.catalog.listVolumeIds()).toEqual([]);
    expect(workLeftovers()).toEqual([]);
  });

  it('refuses while the image is a loop device on this node', async () => {
    await createVolume(core, block('v'));
    await expectRejects(nodeAttach(core, vid('v')), 'FailedPrecondition', 'is not attached to node node-a');
    await attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'cli' });
    const { device } = await nodeAttach(core, vid('v'));
    expect(device).toMatch(/^\/dev\/loop\d+$/);
    // The attachment gone (a controller that forgot the node), the device on this node still holds it.
    await detach(core, vid('v'), nid('node-a'));
    await expectRejects(deleteVolume(core, vid('v')), 'FailedPrecondition', `volume v is still in use on this node as ${device}`);
    expect(findLoopDevice(core.catalog.imagePath('v'))).toBe(device);
  });

  it('refuses while a read-only device alone holds the image (a raw block reader left behind)', async () => {
    await createVolume(core, block('v'));
    const image = core.catalog.imagePath('v');
    const device = await core.mounter.loopAttach(image, { readOnly: true });
    expect(findLoopDevice(image, true)).toBe(device);
    await expectRejects(deleteVolume(core, vid('v')), 'FailedPrecondition', `volume v is still in use on this node as ${device}`);
    expect(existsSync(image)).toBe(true);
  });

  it('deletes a dir volume with its data, and is fine with an unknown id', async () => {
    await createVolume(core, dir('d'));
    await deleteVolume(core, vid('d'));
    await deleteVolume(core, vid('d'));
    await deleteVolume(core, vid('never-existed'));
    expect(existsSync(core.catalog.volumeDir('d'))).toBe(false);
    // A create of it killed before its record: the delete, which finds no volume, sweeps what it left.
    mkdirSync(join(core.catalog.work.dir, 'new@volumes@killed@0badc0de', 'data'), { recursive: true });
    expect(await deleteVolume(core, vid('killed'))).toBe(false);
    expect(readdirSync(core.catalog.work.dir)).toEqual([]);
    await expectRejects(deleteVolume(core, unchecked<VolumeId>('../x')), 'InvalidArgument');
  });
});

describe('expandVolume', () => {
  it('refuses a size that is not a size, and changes nothing', async () => {
    await createVolume(core, block('v'));
    await createVolume(core, dir('d'));
    const before = readFileSync(join(core.catalog.volumeDir('d'), 'volume.json'), 'utf8');
    for (const bad of [Number.NaN, 2 ** 20 + 0.5, 2 ** 60, -1]) {
      await expectRejects(expandVolume(core, vid('v'), bad), 'InvalidArgument', 'new size');
      await expectRejects(expandVolume(core, vid('d'), bad), 'InvalidArgument', 'new size');
    }
    expect(readFileSync(join(core.catalog.volumeDir('d'), 'volume.json'), 'utf8')).toBe(before);
    expect(statSync(core.catalog.imagePath('v')).size).toBe(64 * MiB);
  });

  it('sizes a block image in whole MiB, rounding up, at create and at expand; a dir volume to the byte', async () => {
    // FlexVolume's expandvolume passes kubelet's bytes as they are: 48 MiB and one byte made such an image.
    expect((await createVolume(core, block('odd', { capacityBytes: MiB + 1 }))).volume.capacityBytes).toBe(2 * MiB);
    expect(statSync(core.catalog.imagePath('odd')).size).toBe(2 * MiB);
    expect(await expandVolume(core, vid('odd'), 48 * MiB + 1)).toEqual({ capacityBytes: 49 * MiB, nodeExpansionRequired: true });
    expect(statSync(core.catalog.imagePath('odd')).size).toBe(49 * MiB);
    // A repeat of the same request is the same answer.
    expect(await expandVolume(core, vid('odd'), 48 * MiB + 1)).toEqual({ capacityBytes: 49 * MiB, nodeExpansionRequired: true });
    expect((await createVolume(core, block('odd2', { capacityBytes: MiB + 1 }))).created).toBe(true);
    expect((await createVolume(core, block('odd2', { capacityBytes: MiB + 1 }))).created).toBe(false);
    expect((await createVolume(core, dir('d-odd', { capacityBytes: MiB + 1 }))).volume.capacityBytes).toBe(MiB + 1);
  });

  it('takes a repeated create for a block volume made before sizes were rounded, of the same unrounded size', async () => {
    await createVolume(core, block('unrounded', { capacityBytes: 2 * MiB }));
    // As twinvol wrote it before 8a8caf4: the size as asked, not whole MiB.
    await core.catalog.updateVolume('unrounded', (v) => ({ ...v, capacityBytes: MiB + 1 }));
    const again = await createVolume(core, block('unrounded', { capacityBytes: MiB + 1 }));
    expect({ created: again.created, size: again.volume.capacityBytes }).toEqual({ created: false, size: MiB + 1 });
    await expectRejects(createVolume(core, block('unrounded', { capacityBytes: 3 * MiB })), 'AlreadyExists', `size ${MiB + 1} bytes`);
  });

  it('keeps an expansion within its limit: the largest whole MiB in range, else OutOfRange with nothing grown', async () => {
    await createVolume(core, block('lim'));
    expect(await expandVolume(core, vid('lim'), 96 * MiB + 1, 98 * MiB)).toEqual({ capacityBytes: 97 * MiB, nodeExpansionRequired: true });
    await expectRejects(expandVolume(core, vid('lim'), 100 * MiB + 1, 100 * MiB + 1000), 'OutOfRange', 'whole multiple of 1048576 bytes');
    await expectRejects(expandVolume(core, vid('lim'), 100 * MiB, MiB), 'InvalidArgument', 'size limit');
    expect(statSync(core.catalog.imagePath('lim')).size).toBe(97 * MiB);
    await expectRejects(expandVolume(core, vid('lim'), 2 ** 51), 'OutOfRange', '1 PiB');
  });

  it('grows a block image and asks for node expansion', async () => {
    await createVolume(core, block('v'));
    expect(await expandVolume(core, vid('v'), 128 * MiB)).toEqual({ capacityBytes: 128 * MiB, nodeExpansionRequired: true });
    expect(statSync(core.catalog.imagePath('v')).size).toBe(128 * MiB);
    expect(await core.catalog.requireVolume('v')).toMatchObject({ capacityBytes: 128 * MiB, fsResizePending: true });
  });

  it('never shrinks: a smaller or equal size answers the current one and changes nothing', async () => {
    await createVolume(core, block('v'));
    const before = readFileSync(join(core.catalog.volumeDir('v'), 'volume.json'), 'utf8');
    // A block volume's filesystem grows on the node: said on every call, so a retried expansion answers the same.
    expect(await expandVolume(core, vid('v'), 32 * MiB)).toEqual({ capacityBytes: 64 * MiB, nodeExpansionRequired: true });
    expect(await expandVolume(core, vid('v'), 64 * MiB)).toEqual({ capacityBytes: 64 * MiB, nodeExpansionRequired: true });
    expect(statSync(core.catalog.imagePath('v')).size).toBe(64 * MiB);
    expect(readFileSync(join(core.catalog.volumeDir('v'), 'volume.json'), 'utf8')).toBe(before);
  });

  it('records a dir volume\'s new capacity without node expansion', async () => {
    await createVolume(core, dir('d'));
    expect(await expandVolume(core, vid('d'), 32 * MiB)).toEqual({ capacityBytes: 32 * MiB, nodeExpansionRequired: false });
    const rec = await core.catalog.requireVolume('d');
    expect(rec.capacityBytes).toBe(32 * MiB);
    expect(rec.fsResizePending).toBeUndefined();
  });

  it('answers NotFound for an unknown volume and InvalidArgument for a static one', async () => {
    await expectRejects(expandVolume(core, vid('ghost'), MiB), 'NotFound', 'volume ghost does not exist');
    await createVolume(core, tmpfs('t'));
    await expectRejects(expandVolume(core, vid('t'), MiB), 'InvalidArgument', 'volume t is static: twinvol does not own its size');
  });
});

describe('attach / detach', () => {
  it('records the attachment and repeats idempotently', async () => {
    await createVolume(core, dir('v'));
    const a = await attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'flex' });
    expect(a).toMatchObject({ node: 'node-a', readonly: false, via: 'flex' });
    expect(await attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'csi' })).toEqual(a);
    expect((await core.catalog.requireVolume('v')).attachments).toEqual([a]);
  });

  it('refuses a single-node volume on a second node, naming the holder', async () => {
    await createVolume(core, dir('v'));
    await attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'flex' });
    await expectRejects(
      attach(core, vid('v'), nid('node-b'), { readonly: false, via: 'csi' }),
      'FailedPrecondition',
      'volume v is attached to node node-a; a single-node volume attaches to one node at a time',
    );
    expect((await core.catalog.requireVolume('v')).attachments.map((x) => x.node)).toEqual(['node-a']);
    await detach(core, vid('v'), nid('node-a'));
    await attach(core, vid('v'), nid('node-b'), { readonly: false, via: 'csi' });
    expect((await core.catalog.requireVolume('v')).attachments.map((x) => x.node)).toEqual(['node-b']);
  });

  it('lets a multi-node volume attach to both nodes', async () => {
    await createVolume(core, dir('v', { access: 'multi-node' }));
    await attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'flex' });
    await attach(core, vid('v'), nid('node-b'), { readonly: true, via: 'csi' });
    expect((await core.catalog.requireVolume('v')).attachments.map((x) => [x.node, x.readonly])).toEqual([
      ['node-a', false],
      ['node-b', true],
    ]);
  });

  it('shares a block volume between nodes read-only on every side, or not at all', async () => {
    const rawReaders = { scope: 'multi-node', raw: true, readerOnly: true, singleWriter: false, fsType: '' } as const;
    await createVolume(core, block('v', { access: 'multi-node', accessRequests: [rawReaders] }));
    await attach(core, vid('v'), nid('node-a'), { readonly: true, via: 'csi' });
    await attach(core, vid('v'), nid('node-b'), { readonly: true, via: 'csi' });
    await expectRejects(
      attach(core, vid('v'), nid('node-c'), { readonly: false, via: 'csi' }),
      'FailedPrecondition',
      'volume v is attached to node node-a; a block volume is shared between nodes read-only only',
    );
    await detach(core, vid('v'), nid('node-a'));
    await detach(core, vid('v'), nid('node-b'));
    // A writer first: no second node, not even a reader.
    await attach(core, vid('v'), nid('node-c'), { readonly: false, via: 'csi' });
    await expectRejects(
      attach(core, vid('v'), nid('node-a'), { readonly: true, via: 'csi' }),
      'FailedPrecondition',
      'volume v is attached to node node-c; a block volume is shared between nodes read-only only',
    );
    expect((await core.catalog.requireVolume('v')).attachments.map((x) => [x.node, x.readonly])).toEqual([['node-c', false]]);
  });

  it('answers AlreadyExists for the same node with another readonly flag', async () => {
    await createVolume(core, dir('v'));
    await attach(core, vid('v'), nid('node-a'), { readonly: true, via: 'csi' });
    await expectRejects(attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'csi' }), 'AlreadyExists', 'volume v is already attached to node node-a read-only');
  });

  it('refuses a new attachment beyond maxVolumesPerNode with ResourceExhausted', async () => {
    for (const id of ['v1', 'v2', 'v3']) await createVolume(core, dir(id));
    await attach(core, vid('v1'), nid('node-a'), { readonly: false, via: 'csi', maxVolumesPerNode: 2 });
    await attach(core, vid('v2'), nid('node-a'), { readonly: false, via: 'csi', maxVolumesPerNode: 2 });
    await expectRejects(attach(core, vid('v3'), nid('node-a'), { readonly: false, via: 'csi', maxVolumesPerNode: 2 }), 'ResourceExhausted', 'node node-a already holds 2 volumes, its limit');
    // Repeating an existing attachment is not a new one; another node has its own count.
    await attach(core, vid('v2'), nid('node-a'), { readonly: false, via: 'csi', maxVolumesPerNode: 2 });
    await attach(core, vid('v3'), nid('node-b'), { readonly: false, via: 'csi', maxVolumesPerNode: 2 });
    expect((await core.catalog.requireVolume('v3')).attachments.map((x) => x.node)).toEqual(['node-b']);
  });

  it('answers NotFound when attaching an unknown volume; detach of unknown things is OK', async () => {
    await expectRejects(attach(core, vid('ghost'), nid('node-a'), { readonly: false, via: 'csi' }), 'NotFound', 'volume ghost does not exist');
    await detach(core, vid('ghost'), nid('node-a'));
    await createVolume(core, dir('v'));
    await detach(core, vid('v'), nid('node-z'));
    expect((await core.catalog.requireVolume('v')).attachments).toEqual([]);
    await expectRejects(attach(core, vid('v'), unchecked<NodeId>('bad/node'), { readonly: false, via: 'csi' }), 'InvalidArgument', 'node name');
  });
});
