import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { NodeState } from '../../shared/store/node-state.js';
import { expectCode } from '../csi/helpers/client.js';
import { deviceSha256, fileSha256, writeRandomDevice, writeRandomFile } from '../csi/helpers/data.js';
import { blockCap, MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';
import type { CsiScratch } from '../csi/helpers/scratch.js';
import { useCsiWorld } from '../helpers/csi-world.js';
import { expectSuccess, flexOptions } from '../helpers/flex-runner.js';
import { digestsUnder, fillUp, smallTmpfs } from '../helpers/full-fs.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { expectNodeClean, volumesInCatalog } from '../helpers/reboot.js';
import { loopsUnder, mountsUnder } from '../helpers/scratch.js';
import { failingTool } from '../helpers/tool-wrapper.js';

// Resources running out, through the front ends (issue 8, suite 3): the data root full during a
// create, a blank one, a clone and a restore; no free loop device; the state dir full during a stage
// or publish. Each time the answer names the file (or the device) and says what to do, nothing is
// left half made, what was there before is untouched, and the same call succeeds once the resource is
// back. The core's own answers on a full data root (out of inodes, a record, the admin CLI) are
// test/shared/exhaustion.test.ts. Small tmpfs mounts stand in for the full disks; the scratch's
// cleanup unmounts them and detaches every loop device, whatever the outcome.

const world = useCsiWorld();

const NO_SPACE = '\\(ENOSPC\\); free space \\(df\\) or inodes \\(df -i\\) there, then retry$';
const workEntry = (s: CsiScratch, id: string) => `${s.dataRoot}/\\.work/new@volumes@${id}@[0-9a-f]{8}`;

/** What a failed create must leave: the catalog as it was, and nothing being built in .work/. */
function expectNothingHalfMade(s: CsiScratch, volumes: string[], records: Record<string, string>, label: string): Promise<void> {
  const work = join(s.dataRoot, '.work');
  expect(existsSync(work) ? readdirSync(work) : [], `${label}: .work/`).toEqual([]);
  expect(digestsUnder(s.dataRoot, CATALOG_NOISE), `${label}: the catalog's files`).toEqual(records);
  return volumesInCatalog(s).then((ids) => expect(ids, `${label}: volumes`).toEqual(volumes));
}
/** Not the catalog's content: the test's filler, transient locks, entries being built. */
const CATALOG_NOISE = /^(filler-|locks$|\.work$)/;

const blockVolume = (name: string, extra: { volume_content_source?: object } = {}) => ({
  name,
  volume_capabilities: [mountCap()],
  parameters: { backend: 'block' },
  capacity_range: size(8 * MiB),
  ...extra,
});

describe('the data root runs out of space', () => {
  it('CreateVolume blank, from a snapshot and as a clone (block and dir): RESOURCE_EXHAUSTED naming the file, nothing half made, done once space is freed', async () => {
    const w = await world((s) => void smallTmpfs(s.dataRoot, 'size=40m'));
    const { s, ctl } = w;
    await ctl('CreateVolume', blockVolume('src'));
    // 4 MiB of data in the source's image: what a clone and a restore must copy (sparse, the rest costs nothing).
    const image = join(s.dataRoot, 'volumes/src/image.img');
    const data = writeRandomDevice(image, 4 * MiB);
    await ctl('CreateSnapshot', { name: 'snap', source_volume_id: 'src' });
    // A dir volume's tree is copied too (cp -a), with 4 MiB in one file.
    await ctl('CreateVolume', { ...blockVolume('dsrc'), parameters: { backend: 'dir' } });
    const file = writeRandomFile(join(s.dataRoot, 'volumes/dsrc/data/file.bin'), 4 * MiB);
    const records = digestsUnder(s.dataRoot, CATALOG_NOISE);
    expect(Object.keys(records)).toEqual([
      'nodes/node-a.json', 'snapshots/snap/image.img', 'snapshots/snap/snapshot.json',
      'volumes/dsrc/data/file.bin', 'volumes/dsrc/volume.json', 'volumes/src/image.img', 'volumes/src/volume.json',
    ]);
    const before = ['dsrc', 'src'];

    // Room for a record, not for a copy.
    let free = fillUp(s.dataRoot, MiB);
    const copies = [
      ['clone', blockVolume('clone', { volume_content_source: { volume: { volume_id: 'src' } } }), 'volumes/src/image\\.img', 'image\\.img'],
      ['restored', blockVolume('restored', { volume_content_source: { snapshot: { snapshot_id: 'snap' } } }), 'snapshots/snap/image\\.img', 'image\\.img'],
      ['dclone', { ...blockVolume('dclone', { volume_content_source: { volume: { volume_id: 'dsrc' } } }), parameters: { backend: 'dir' } }, 'volumes/dsrc/data', 'data'],
    ] as const;
    for (const [id, request, from, to] of copies) {
      const message = await expectCode(ctl('CreateVolume', request), 'RESOURCE_EXHAUSTED');
      expect(message).toMatch(new RegExp(`^cannot copy ${s.dataRoot}/${from} to ${workEntry(s, id)}/${to}: no space or no free inodes left on its filesystem ${NO_SPACE}`));
      await expectNothingHalfMade(s, before, records, `CreateVolume ${id}`);
    }
    free();

    // Not a byte left: even the blank volume's record does not fit.
    free = fillUp(s.dataRoot);
    const message = await expectCode(ctl('CreateVolume', blockVolume('blank')), 'RESOURCE_EXHAUSTED');
    // The image is made and formatted before the record is written (shared/backends/block.ts populate):
    // whichever write finds the disk full first is named.
    expect(message).toMatch(new RegExp(`^cannot write ${workEntry(s, 'blank')}/(volume\\.json|image\\.img): .*${NO_SPACE}`));
    await expectNothingHalfMade(s, before, records, 'CreateVolume blank');
    // A FlexVolume PV that creates its volume on first use says the same as a Failure.
    const attach = () => w.flex('attach', flexOptions('pv-f', { volumeId: 'f', createIfMissing: 'true', size: '8Mi', backend: 'block' }), 'node-a');
    const refused = await attach();
    expect(refused.exitCode).toBe(1);
    expect(refused.reply).toEqual({ status: 'Failure', message: expect.stringMatching(new RegExp(`^cannot write ${workEntry(s, 'f')}/(volume\\.json|image\\.img): .*${NO_SPACE}`)) });
    await expectNothingHalfMade(s, before, records, 'FlexVolume attach with createIfMissing');
    free();

    // Space is back: the very same calls succeed, and the copies hold the source's data.
    for (const [, request] of copies) await ctl('CreateVolume', request);
    await ctl('CreateVolume', blockVolume('blank'));
    expectSuccess(await attach());
    expect(await volumesInCatalog(s)).toEqual(['blank', 'clone', 'dclone', 'dsrc', 'f', 'restored', 'src']);
    for (const id of ['clone', 'restored']) expect(deviceSha256(join(s.dataRoot, 'volumes', id, 'image.img'), 4 * MiB), id).toBe(data);
    expect(fileSha256(join(s.dataRoot, 'volumes/dclone/data/file.bin'))).toBe(file);
    expect(digestsUnder(join(s.dataRoot, 'volumes/src'))).toEqual({ 'image.img': records['volumes/src/image.img'], 'volume.json': records['volumes/src/volume.json'] });
  });
});

describe('no free loop device', () => {
  // What util-linux 2.38 says when every loop device is bound: losetup --find, and mount -o loop
  // (libmount's MNT_ERR_LOOPDEV), which a usual stage runs first (shared/mounter.ts mountImage).
  // Where the mount addon binds devices itself, a failure leaves the step to these same tools, which
  // word it; the kernel makes loop devices on demand, so the addon cannot be made to run out for
  // real, and these worlds run without it (TWINVOL_NATIVE_MOUNT=off) to reach the tools.
  const noLoopDevice = (s: CsiScratch) => {
    const losetup = failingTool(s.root, 'losetup', '--find', 'losetup: cannot find an unused loop device');
    const mount = failingTool(s.root, 'mount', 'loop', 'mount: /proc/self/fd/3: failed to setup loop device for the image.');
    const remove = () => [losetup, mount].forEach((t) => t.remove());
    return { losetup, mount, world: { path: `${losetup.dir}:${mount.dir}`, env: { TWINVOL_NATIVE_MOUNT: 'off' } }, remove };
  };
  type NoLoopDevice = ReturnType<typeof noLoopDevice>;
  const RUN_OUT = /^no free loop device on this node for \S+\/volumes\/\S+\/image\.img \(losetup: cannot find an unused loop device\); .*then retry$/;

  it('NodeStageVolume (filesystem and raw block) fails, stages nothing, changes no fence; it stages once a device is free', async () => {
    let tools: NoLoopDevice | undefined;
    const w = await world((s) => (tools = noLoopDevice(s)).world);
    if (!tools) throw new Error('losetup and mount were not wrapped');
    const { s, ctl, node } = w;
    const uses = [
      { id: 'fs', cap: mountCap() },
      { id: 'raw', cap: blockCap() },
    ];
    for (const { id, cap } of uses) {
      await ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: { backend: 'block' }, capacity_range: size(32 * MiB) });
      await ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
      mkdirSync(stagingPath(s.kubeletDir, id), { recursive: true });
    }
    const catalog = digestsUnder(s.dataRoot, CATALOG_NOISE);
    for (const { id, cap } of uses) {
      const staging = stagingPath(s.kubeletDir, id);
      const message = await expectCode(node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap }), 'RESOURCE_EXHAUSTED');
      expect(message).toMatch(RUN_OUT);
      expect(mountAt(staging), `${id}: a mount`).toBeUndefined();
      expect(await new NodeState(s.stateDir).listAll(), `${id}: mount records`).toEqual([]);
      // The attachment carries no in-use mark: a detach now frees the volume instead of fencing it.
      expect(digestsUnder(s.dataRoot, CATALOG_NOISE), `${id}: the catalog`).toEqual(catalog);
    }
    expect(tools.losetup.calls().filter((c) => c.includes('--find'))).toHaveLength(2);
    // The filesystem stage tried mount -o loop first, then losetup, whose reason the answer gives.
    expect(tools.mount.calls().filter((c) => c.includes(' loop '))).toHaveLength(1);
    expect(loopsUnder(s.root)).toEqual([]);

    tools.remove();
    for (const { id, cap } of uses) {
      const staging = stagingPath(s.kubeletDir, id);
      await node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap });
      await node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
      await ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    }
    await expectNodeClean(s);
  });

  it('FlexVolume waitforattach and mountdevice answer Failure, change nothing, and succeed once a device is free', async () => {
    let tools: NoLoopDevice | undefined;
    const w = await world((s) => (tools = noLoopDevice(s)).world);
    if (!tools) throw new Error('losetup and mount were not wrapped');
    const { s } = w;
    const options = flexOptions('pv-b', { volumeId: 'b', createIfMissing: 'true', size: '32Mi', backend: 'block' });
    const global = deviceMountPath(s.kubeletDir, 'pv-b');
    expectSuccess(await w.flex('attach', options, 'node-a'));
    const catalog = digestsUnder(s.dataRoot, CATALOG_NOISE);
    for (const argv of [['waitforattach', '', options], ['mountdevice', global, '', options]]) {
      const r = await w.flex(...argv);
      expect(r.exitCode, r.output).toBe(1);
      expect(r.reply).toEqual({ status: 'Failure', message: expect.stringMatching(RUN_OUT) });
      expect(await new NodeState(s.stateDir).listAll(), `${argv[0]}: mount records`).toEqual([]);
      expect(digestsUnder(s.dataRoot, CATALOG_NOISE), `${argv[0]}: the catalog`).toEqual(catalog);
    }
    expect(mountAt(global)).toBeUndefined();

    tools.remove();
    const device = expectSuccess(await w.flex('waitforattach', '', options)).reply.device;
    expect(device).toMatch(/^\/dev\/loop\d+$/);
    expectSuccess(await w.flex('mountdevice', global, String(device), options));
    expect(mountAt(global)?.source).toBe(device);
    expectSuccess(await w.flex('unmountdevice', global));
    expectSuccess(await w.flex('detach', 'pv-b', 'node-a'));
    await expectNodeClean(s);
  });
});

describe('the state dir runs out of space', () => {
  it('NodeStageVolume, NodePublishVolume and FlexVolume mountdevice: RESOURCE_EXHAUSTED / Failure naming the record; earlier records whole; done once space is freed', async () => {
    const w = await world((s) => void smallTmpfs(s.stateDir, 'size=1m'));
    const { s, ctl, node } = w;
    const cap = mountCap();
    for (const id of ['a', 'b']) {
      await ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
      await ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
      mkdirSync(stagingPath(s.kubeletDir, id), { recursive: true });
    }
    const stage = (id: string) => node('NodeStageVolume', { volume_id: id, staging_target_path: stagingPath(s.kubeletDir, id), volume_capability: cap });
    const publish = (id: string, pod: string) => {
      mkdirSync(dirname(targetPath(s.kubeletDir, pod, id)), { recursive: true });
      return node('NodePublishVolume', { volume_id: id, staging_target_path: stagingPath(s.kubeletDir, id), target_path: targetPath(s.kubeletDir, pod, id), volume_capability: cap });
    };
    await stage('a');
    await publish('a', 'pod-1');
    const records = digestsUnder(join(s.stateDir, 'mounts'));
    expect(Object.keys(records)).toHaveLength(2);
    const catalog = digestsUnder(s.dataRoot, CATALOG_NOISE);
    const flexOpts = flexOptions('pv-c', { volumeId: 'c', createIfMissing: 'true', size: '1Mi', backend: 'dir' });
    const flexGlobal = deviceMountPath(s.kubeletDir, 'pv-c');
    expectSuccess(await w.flex('attach', flexOpts, 'node-a'));
    const catalogWithC = digestsUnder(s.dataRoot, CATALOG_NOISE);

    const free = fillUp(s.stateDir);
    const record = (id: string) => `${s.stateDir}/mounts/${id}@[0-9a-f]{32}\\.json`;
    expect(await expectCode(stage('b'), 'RESOURCE_EXHAUSTED')).toMatch(new RegExp(`^cannot write ${record('b')}: .*${NO_SPACE}`));
    expect(await expectCode(publish('a', 'pod-2'), 'RESOURCE_EXHAUSTED')).toMatch(new RegExp(`^cannot write ${record('a')}: .*${NO_SPACE}`));
    const r = await w.flex('mountdevice', flexGlobal, '', flexOpts);
    expect(r.exitCode, r.output).toBe(1);
    expect(r.reply).toEqual({ status: 'Failure', message: expect.stringMatching(new RegExp(`^cannot write ${record('c')}: .*${NO_SPACE}`)) });

    // Nothing half done: no mount, no target left behind, the earlier records whole, no in-use mark in
    // the catalog (a detach now would fence b and c on this node for good).
    for (const path of [stagingPath(s.kubeletDir, 'b'), targetPath(s.kubeletDir, 'pod-2', 'a'), flexGlobal]) expect(mountAt(path), path).toBeUndefined();
    expect(existsSync(targetPath(s.kubeletDir, 'pod-2', 'a'))).toBe(false);
    expect(digestsUnder(join(s.stateDir, 'mounts'))).toEqual(records);
    expect(mountAt(targetPath(s.kubeletDir, 'pod-1', 'a'))?.root).toMatch(/\/volumes\/a\/data$/);
    expect(digestsUnder(s.dataRoot, CATALOG_NOISE)).toEqual(catalogWithC);
    expect(catalogWithC['volumes/a/volume.json']).toBe(catalog['volumes/a/volume.json']);

    free();
    await stage('b');
    await publish('a', 'pod-2');
    expectSuccess(await w.flex('mountdevice', flexGlobal, '', flexOpts));
    expect(await new NodeState(s.stateDir).listAll()).toHaveLength(5);
    for (const [id, pod] of [['a', 'pod-1'], ['a', 'pod-2']]) await node('NodeUnpublishVolume', { volume_id: id!, target_path: targetPath(s.kubeletDir, pod!, id!) });
    for (const id of ['a', 'b']) await node('NodeUnstageVolume', { volume_id: id, staging_target_path: stagingPath(s.kubeletDir, id) });
    expectSuccess(await w.flex('unmountdevice', flexGlobal));
    // The small state dir is the test's own mount: the kubelet dir is where twinvol's would be.
    expect(mountsUnder(s.kubeletDir)).toEqual([]);
    expect(await new NodeState(s.stateDir).listAll()).toEqual([]);
  });
});
