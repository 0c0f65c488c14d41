import { existsSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readMounts } from '../../shared/mountinfo.js';
import { outcome } from '../csi/helpers/client.js';
import { deviceSize } from '../csi/helpers/data.js';
import { mountCap, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { optionsOf, useExecServer } from './helpers.js';

/**
 * A third-party attachable FlexVolume driver (test/exec/drivers/loop.sh: loop devices, ext4) through
 * the real CSI server over its socket, every call twice as a CO retries, with kubelet's exact argv
 * checked against what the driver logged.
 */
const csi = useExecServer();
const ID = 'flex-loop-1';
const POD = { 'csi.storage.k8s.io/pod.name': 'web-0', 'csi.storage.k8s.io/pod.namespace': 'shop', 'csi.storage.k8s.io/pod.uid': 'uid-77', 'csi.storage.k8s.io/serviceAccount.name': 'web' };

const mountsAt = (path: string) => readMounts().filter((m) => m.mountPoint === path).length;
const verbs = (calls: string[][], verb: string) => calls.filter((c) => c[0] === verb);

describe('exec backend: an attachable driver, the whole life', () => {
  it('registers, attaches, stages, publishes, and undoes each, calling the driver as kubelet does', async () => {
    const image = join(csi.s.root, 'disk.img');
    // 64 MiB, sparse: room for ext4.
    writeFileSync(image, '');
    truncateSync(image, 64 * 2 ** 20);

    const params = { backend: 'exec', driver: 'acme/loop', fsType: 'ext4', image };
    const created = await csi.ctl('CreateVolume', { name: ID, parameters: params, volume_capabilities: [mountCap('ext4')] });
    expect(created.volume.volume_context).toEqual(params);
    // Registration only: a repeat is the same volume, and nothing ran the driver.
    await csi.ctl('CreateVolume', { name: ID, parameters: params, volume_capabilities: [mountCap('ext4')] });
    expect(csi.calls('loop')).toEqual([]);
    const ctx = created.volume.volume_context;

    const pub = await csi.ctl('ControllerPublishVolume', { volume_id: ID, node_id: 'node-a', volume_capability: mountCap('ext4'), volume_context: ctx });
    const device = pub.publish_context.device ?? '';
    expect(device).toMatch(/^\/dev\/loop[0-9]+$/);
    expect((await csi.ctl('ControllerPublishVolume', { volume_id: ID, node_id: 'node-a', volume_capability: mountCap('ext4'), volume_context: ctx })).publish_context).toEqual(pub.publish_context);

    const staging = stagingPath(csi.s.kubeletDir, ID);
    const stage = { volume_id: ID, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: mountCap('ext4'), volume_context: ctx };
    await csi.node('NodeStageVolume', stage);
    await csi.node('NodeStageVolume', stage);
    expect(mountsAt(staging)).toBe(1);

    const target = targetPath(csi.s.kubeletDir, 'uid-77', ID);
    const publish = { volume_id: ID, staging_target_path: staging, target_path: target, volume_capability: mountCap('ext4', 'SINGLE_NODE_WRITER', { volume_mount_group: '4321' }), volume_context: { ...ctx, ...POD } };
    await csi.node('NodePublishVolume', publish);
    await csi.node('NodePublishVolume', publish);
    // mount is Not supported: kubelet's fallback, a bind of the staged filesystem.
    expect(mountsAt(target)).toBe(1);
    writeFileSync(join(target, 'hello'), 'from the pod');
    expect(readFileSync(join(staging, 'hello'), 'utf8')).toBe('from the pod');

    await csi.node('NodeUnpublishVolume', { volume_id: ID, target_path: target });
    await csi.node('NodeUnpublishVolume', { volume_id: ID, target_path: target });
    expect(existsSync(target)).toBe(false);
    await csi.node('NodeUnstageVolume', { volume_id: ID, staging_target_path: staging });
    await csi.node('NodeUnstageVolume', { volume_id: ID, staging_target_path: staging });
    expect(mountsAt(staging)).toBe(0);
    await csi.ctl('ControllerUnpublishVolume', { volume_id: ID, node_id: 'node-a' });
    expect(readFileSync('/proc/mounts', 'utf8')).not.toContain(device);
    expect(existsSync(`/sys/block/${device.slice(5)}/loop/backing_file`) && readFileSync(`/sys/block/${device.slice(5)}/loop/backing_file`, 'utf8').trim() === image).toBe(false);
    await csi.ctl('DeleteVolume', { volume_id: ID });
    await csi.ctl('DeleteVolume', { volume_id: ID });
    // DeleteVolume forgets: the driver's storage is untouched.
    expect(existsSync(image)).toBe(true);

    const calls = csi.calls('loop');
    // Each mount-table-guarded verb ran once although the CO asked twice.
    expect(calls.map((c) => c[0])).toEqual(['init', 'attach', 'attach', 'waitforattach', 'mountdevice', 'mount', 'unmount', 'unmountdevice', 'detach']);
    const [attach] = verbs(calls, 'attach');
    expect(attach?.[2]).toBe('node-a');
    expect(optionsOf(attach, 1)).toEqual({ 'kubernetes.io/fsType': 'ext4', 'kubernetes.io/readwrite': 'rw', 'kubernetes.io/pvOrVolumeName': ID, image });
    const [wait] = verbs(calls, 'waitforattach');
    expect(wait?.slice(0, 2)).toEqual(['waitforattach', device]);
    expect(optionsOf(wait, 2)).toEqual(optionsOf(attach, 1));
    const [mountDevice] = verbs(calls, 'mountdevice');
    expect(mountDevice?.slice(0, 3)).toEqual(['mountdevice', staging, device]);
    const [mount] = verbs(calls, 'mount');
    expect(mount?.[1]).toBe(target);
    expect(optionsOf(mount, 2)).toEqual({
      ...optionsOf(attach, 1),
      'kubernetes.io/pod.name': 'web-0',
      'kubernetes.io/pod.namespace': 'shop',
      'kubernetes.io/pod.uid': 'uid-77',
      'kubernetes.io/serviceAccount.name': 'web',
      'kubernetes.io/mounterArgs.FsGroup': '4321',
    });
    expect(verbs(calls, 'unmountdevice')).toEqual([['unmountdevice', staging]]);
    expect(verbs(calls, 'detach')).toEqual([['detach', ID, 'node-a']]);
  });

  it('a static PV (no CreateVolume) works from its volume attributes alone, and a driver failure reaches the CO with its message', async () => {
    const ctx = { backend: 'exec', driver: 'acme/loop', image: join(csi.s.root, 'missing.img') };
    const failed = await outcome(csi.ctl('ControllerPublishVolume', { volume_id: 'static-pv-1', node_id: 'node-a', volume_capability: mountCap('ext4'), volume_context: ctx }));
    expect(failed.code).toBe('INTERNAL');
    expect(failed.message).toContain(`attach command failed, status: Failure, reason: no image file ${ctx.image}`);
    // The teardown calls carry no context: the driver is found from the registration the publish made.
    await csi.ctl('ControllerUnpublishVolume', { volume_id: 'static-pv-1', node_id: 'node-a' });
    expect(verbs(csi.calls('loop'), 'detach').at(-1)).toEqual(['detach', 'static-pv-1', 'node-a']);
    expect((await outcome(csi.ctl('ControllerUnpublishVolume', { volume_id: 'never-seen', node_id: 'node-a' }))).code).toBe('OK');
  });

  it('a driver whose init says requiresFSResize grows the volume (expandvolume) and the device on the node (expandfs)', async () => {
    const id = 'flex-grow-1';
    const image = join(csi.s.root, 'grow.img');
    writeFileSync(image, '');
    truncateSync(image, 32 * 2 ** 20);
    const params = { backend: 'exec', driver: 'acme/loopresize', fsType: 'ext4', image };
    const created = await csi.ctl('CreateVolume', { name: id, parameters: params, volume_capabilities: [mountCap('ext4')], capacity_range: { required_bytes: String(32 * 2 ** 20) } });
    const ctx = created.volume.volume_context;
    const pub = await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap('ext4'), volume_context: ctx });
    const staging = stagingPath(csi.s.kubeletDir, id);
    await csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: mountCap('ext4'), volume_context: ctx });
    const device = pub.publish_context.device ?? '';
    const grown = await csi.ctl('ControllerExpandVolume', { volume_id: id, capacity_range: { required_bytes: String(64 * 2 ** 20) } });
    expect(grown).toMatchObject({ capacity_bytes: String(64 * 2 ** 20), node_expansion_required: true });
    await csi.node('NodeExpandVolume', { volume_id: id, volume_path: staging, staging_target_path: staging, capacity_range: { required_bytes: String(64 * 2 ** 20) } });
    expect(deviceSize(device)).toBe(64 * 2 ** 20);
    const calls = csi.calls('loopresize');
    const expandVolume = calls.find((c) => c[0] === 'expandvolume');
    // kubelet's device mount path (flexvolume plugin.go getDeviceMountPath), then new and old size.
    const globalMount = join(csi.s.kubeletDir, 'plugins/kubernetes.io/flexvolume/acme/loopresize/mounts', id);
    expect(expandVolume?.slice(2)).toEqual([globalMount, String(64 * 2 ** 20), String(32 * 2 ** 20)]);
    expect(optionsOf(expandVolume, 1)).toMatchObject({ 'kubernetes.io/pvOrVolumeName': id, image });
    const expandFs = calls.find((c) => c[0] === 'expandfs');
    // The old size is the catalog's before the expansion (kept from ControllerExpandVolume), not the new one again.
    expect(expandFs?.slice(2)).toEqual([device, staging, String(64 * 2 ** 20), String(32 * 2 ** 20)]);
    await csi.node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
  });

  it('a driver whose init says requiresFSResize: false is grown by its expandvolume alone: no node expansion, no expandfs', async () => {
    const id = 'flex-grow-2';
    const image = join(csi.s.root, 'grow-nofs.img');
    writeFileSync(image, '');
    truncateSync(image, 32 * 2 ** 20);
    const params = { backend: 'exec', driver: 'acme/loop', fsType: 'ext4', image };
    const created = await csi.ctl('CreateVolume', { name: id, parameters: params, volume_capabilities: [mountCap('ext4')], capacity_range: { required_bytes: String(32 * 2 ** 20) } });
    const ctx = created.volume.volume_context;
    const pub = await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap('ext4'), volume_context: ctx });
    const staging = stagingPath(csi.s.kubeletDir, id);
    await csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: mountCap('ext4'), volume_context: ctx });
    // The expand controller runs expandvolume for any FlexVolume driver, then marks the claim resized
    // when the plugin does not RequiresFSResize (flexvolume plugin.go): CSI's node_expansion_required false.
    const grow = { volume_id: id, capacity_range: { required_bytes: String(64 * 2 ** 20) } };
    expect(await csi.ctl('ControllerExpandVolume', grow)).toMatchObject({ capacity_bytes: String(64 * 2 ** 20), node_expansion_required: false });
    expect(await csi.ctl('ControllerExpandVolume', grow)).toMatchObject({ capacity_bytes: String(64 * 2 ** 20), node_expansion_required: false });
    expect(statSync(image).size).toBe(64 * 2 ** 20);
    // A CO that asks the node anyway gets the size, and the driver is not asked to grow a filesystem.
    expect(await csi.node('NodeExpandVolume', { volume_id: id, volume_path: staging, staging_target_path: staging, capacity_range: { required_bytes: String(64 * 2 ** 20) } })).toMatchObject({ capacity_bytes: String(64 * 2 ** 20) });
    const calls = csi.calls('loop').filter((c) => c[0]?.startsWith('expand'));
    const globalMount = join(csi.s.kubeletDir, 'plugins/kubernetes.io/flexvolume/acme/loop/mounts', id);
    expect(calls.map((c) => c.slice(2))).toEqual([[globalMount, String(64 * 2 ** 20), String(32 * 2 ** 20)]]);
    expect(calls.map((c) => c[0])).toEqual(['expandvolume']);
    await csi.node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    await csi.ctl('DeleteVolume', { volume_id: id });
  });

  it('the built-in backends are untouched beside exec volumes', async () => {
    const caps = (await csi.ctl('ControllerGetCapabilities', {})).capabilities.map((c) => c.rpc.type);
    expect(caps).toContain('CREATE_DELETE_SNAPSHOT');
    const dir = await csi.ctl('CreateVolume', { name: 'plain-dir', parameters: { backend: 'dir' }, volume_capabilities: [mountCap()], capacity_range: { required_bytes: String(2 ** 20) } });
    expect(dir.volume.volume_context).toEqual({ backend: 'dir' });
    await csi.ctl('DeleteVolume', { volume_id: 'plain-dir' });
  });
});
