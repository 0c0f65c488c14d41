import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readMounts } from '../../shared/mountinfo.js';
import { outcome } from '../csi/helpers/client.js';
import { mountCap, targetPath } from '../csi/helpers/requests.js';
import { vid } from '../helpers/ids.js';
import { coreIn } from '../shared/core-scratch.js';
import { useExecServer } from './helpers.js';

/**
 * One twinvol CSI deployment per legacy driver (--backends exec --flex-driver vendor/name): the server
 * offers exactly what the driver's init reports, re-read when the driver file changes.
 */
const tmpfs = useExecServer(() => ['--backends', 'exec', '--flex-driver', 'acme/tmpfs']);
const loop = useExecServer(() => ['--backends', 'exec', '--flex-driver', 'acme/loop']);
const host = useExecServer(() => ['--flex-exec', 'host']);
const allowed = useExecServer(() => ['--flex-inline', 'acme/tmpfs', '--flex-inline', 'acme/verbose', '--flex-inline', 'acme/halfway', '--flex-inline', 'acme/missing']);

const controllerCaps = async (csi: typeof tmpfs) => (await csi.ctl('ControllerGetCapabilities', {})).capabilities.map((c) => c.rpc.type).sort();
const nodeCaps = async (csi: typeof tmpfs) => (await csi.node('NodeGetCapabilities', {})).capabilities.map((c) => c.rpc.type).sort();

describe('exec backend: a server fronting one driver', () => {
  it('a non-attachable driver: registration, mounts and the controller\'s expansion only: no attach, no stage, no snapshots, no node expansion', async () => {
    // The expand controller runs any FlexVolume driver's expandvolume; requiresFSResize: false leaves
    // out only the node's half (expandfs), which kubelet then never runs.
    expect(await controllerCaps(tmpfs)).toEqual(['CREATE_DELETE_VOLUME', 'EXPAND_VOLUME']);
    // init left fsGroup to kubelet's default (true): the driver takes the pod's group.
    expect(await nodeCaps(tmpfs)).toEqual(['VOLUME_MOUNT_GROUP']);
    const plugin = (await tmpfs.identity('GetPluginCapabilities', {})).capabilities;
    expect(plugin).toEqual([{ service: { type: 'CONTROLLER_SERVICE' }, type: 'service' }, { volume_expansion: { type: 'ONLINE' }, type: 'volume_expansion' }]);
    expect((await outcome(tmpfs.client.call('GroupController', 'GroupControllerGetCapabilities', {}))).code).toBe('UNIMPLEMENTED');
  });

  it('CreateVolume without a backend or driver registers a volume of the fronted driver, which then mounts', async () => {
    const created = await tmpfs.ctl('CreateVolume', { name: 'one', parameters: { share: 'team-a' }, volume_capabilities: [mountCap()] });
    expect(created.volume.volume_context).toEqual({ backend: 'exec', driver: 'acme/tmpfs', share: 'team-a' });
    const refused = await outcome(tmpfs.ctl('CreateVolume', { name: 'two', parameters: { driver: 'acme/loop' }, volume_capabilities: [mountCap()] }));
    expect(refused).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('this server fronts acme/tmpfs') });
    const target = targetPath(tmpfs.s.kubeletDir, 'uid-one', 'one');
    await tmpfs.node('NodePublishVolume', { volume_id: 'one', target_path: target, volume_capability: mountCap(), volume_context: created.volume.volume_context });
    expect(readMounts().filter((m) => m.mountPoint === target)).toHaveLength(1);
    const mount = tmpfs.calls('tmpfs').find((c) => c[0] === 'mount');
    expect(JSON.parse(mount?.[2] ?? '{}')).toMatchObject({ share: 'team-a', 'kubernetes.io/pvOrVolumeName': 'one' });
    // A driver with no expandvolume answers Not supported: expanderDefaults' success, and no node half.
    expect(await tmpfs.ctl('ControllerExpandVolume', { volume_id: 'one', capacity_range: { required_bytes: String(2 ** 20) } })).toMatchObject({ capacity_bytes: String(2 ** 20), node_expansion_required: false });
    expect(tmpfs.calls('tmpfs').filter((c) => c[0]?.startsWith('expand')).map((c) => c[0])).toEqual(['expandvolume']);
    await tmpfs.node('NodeUnpublishVolume', { volume_id: 'one', target_path: target });
    await tmpfs.ctl('DeleteVolume', { volume_id: 'one' });
  });

  it('an attachable driver: publish and stage; init runs again when the driver file changes', async () => {
    expect(await controllerCaps(loop)).toEqual(['CREATE_DELETE_VOLUME', 'EXPAND_VOLUME', 'PUBLISH_READONLY', 'PUBLISH_UNPUBLISH_VOLUME']);
    expect(await nodeCaps(loop)).toEqual(['STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP']);
    await nodeCaps(loop);
    expect(loop.calls('loop').filter((c) => c[0] === 'init')).toHaveLength(1);
    // A new version of the driver that resizes: kubelet's prober would re-init it, and so does twinvol.
    const path = loop.driverPath('loop');
    writeFileSync(path, readFileSync(path, 'utf8').replace('"requiresFSResize":false', '"requiresFSResize":true'));
    expect(await nodeCaps(loop)).toEqual(['EXPAND_VOLUME', 'STAGE_UNSTAGE_VOLUME', 'VOLUME_MOUNT_GROUP']);
    expect(await controllerCaps(loop)).toEqual(['CREATE_DELETE_VOLUME', 'EXPAND_VOLUME', 'PUBLISH_READONLY', 'PUBLISH_UNPUBLISH_VOLUME']);
    expect(loop.calls('loop').filter((c) => c[0] === 'init')).toHaveLength(2);
  });
});

describe('exec backend: inline volumes', () => {
  const inline = (extra: Record<string, string>) => ({ 'csi.storage.k8s.io/ephemeral': 'true', 'csi.storage.k8s.io/pod.name': 'web-0', 'csi.storage.k8s.io/pod.namespace': 'team-a', 'csi.storage.k8s.io/pod.uid': 'uid-inline', 'csi.storage.k8s.io/serviceAccount.name': 'default', ...extra });
  const publishInline = (csi: typeof tmpfs, volume_context: Record<string, string>) =>
    outcome(csi.node('NodePublishVolume', { volume_id: 'csi-inline', target_path: targetPath(csi.s.kubeletDir, 'uid-inline', 'csi-inline'), volume_capability: mountCap(), volume_context }));
  /** Nothing was asked of the driver, registered or made for the refused volume. */
  const untouched = async (csi: typeof tmpfs) => {
    const target = targetPath(csi.s.kubeletDir, 'uid-inline', 'csi-inline');
    expect(csi.calls('tmpfs').filter((c) => c[0] === 'mount' && c[1] === target)).toEqual([]);
    expect(await coreIn(csi.s).catalog.getVolume(vid('csi-inline'))).toBeUndefined();
    expect(existsSync(target)).toBe(false);
  };

  it("are refused unless the node plugin names the driver with --flex-inline: a pod's author would choose the driver and its options", async () => {
    expect(await publishInline(host, inline({ backend: 'exec', driver: 'acme/tmpfs', server: 'attacker.example' }))).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('an inline volume cannot be of FlexVolume driver acme/tmpfs: its options would be the pod author\'s (the node plugin\'s --flex-inline acme/tmpfs allows it)') });
    await untouched(host);
    // A server fronting one driver routes every volume to it, inline ones too.
    expect(await publishInline(tmpfs, inline({}))).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('cannot be of FlexVolume driver acme/tmpfs') });
    await untouched(tmpfs);
  });

  it("with --flex-inline, mount with the pod the CO names, and never with kubernetes.io/ keys of the pod author's", async () => {
    for (const key of ['kubernetes.io/pod.namespace', 'kubernetes.io/secret/password', 'kubernetes.io/fsType']) {
      const refused = await publishInline(allowed, inline({ backend: 'exec', driver: 'acme/tmpfs', [key]: 'forged' }));
      expect(refused).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(`volume_context key "${key}" in an inline volume`) });
      await untouched(allowed);
    }
    expect(await publishInline(allowed, inline({ backend: 'exec', driver: 'acme/loop' }))).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('--flex-inline acme/loop allows it') });
    const target = targetPath(allowed.s.kubeletDir, 'uid-inline', 'csi-inline');
    expect(await publishInline(allowed, inline({ backend: 'exec', driver: 'acme/tmpfs', share: 'scratch' }))).toMatchObject({ code: 'OK' });
    const mount = allowed.calls('tmpfs').find((c) => c[0] === 'mount' && c[1] === target);
    expect(JSON.parse(mount?.[2] ?? '{}')).toMatchObject({ share: 'scratch', 'kubernetes.io/pod.namespace': 'team-a', 'kubernetes.io/pod.name': 'web-0' });
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toMatchObject({ lifetime: 'pod', parameters: { driver: 'acme/tmpfs', share: 'scratch' } });
    await allowed.node('NodeUnpublishVolume', { volume_id: 'csi-inline', target_path: target });
    expect(readMounts().filter((m) => m.mountPoint === target)).toHaveLength(0);
    // Gone with its pod, as twinvol's own inline volumes are: one record per pod ever run would pile up.
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toBeUndefined();
    expect(await outcome(allowed.node('NodeUnpublishVolume', { volume_id: 'csi-inline', target_path: target }))).toEqual({ code: 'OK', message: '' });
  });

  it('a published PV volume of the same id is not taken for an inline one: its record stays without the lifetime', async () => {
    const pvTarget = targetPath(allowed.s.kubeletDir, 'uid-pv', 'csi-inline');
    await allowed.node('NodePublishVolume', { volume_id: 'csi-inline', target_path: pvTarget, volume_capability: mountCap(), volume_context: { backend: 'exec', driver: 'acme/tmpfs' } });
    expect(await publishInline(allowed, inline({ backend: 'exec', driver: 'acme/tmpfs' }))).toEqual({ code: 'FAILED_PRECONDITION', message: expect.stringContaining('describes it otherwise (lifetime: not an inline volume)') });
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).not.toHaveProperty('lifetime');
    await allowed.node('NodeUnpublishVolume', { volume_id: 'csi-inline', target_path: pvTarget });
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toMatchObject({ parameters: { driver: 'acme/tmpfs' } });
    await allowed.ctl('DeleteVolume', { volume_id: 'csi-inline' });
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toBeUndefined();
  });

  it('a failed inline publish leaves no record unless it left a mount, which the unpublish then takes with the record', async () => {
    const target = targetPath(allowed.s.kubeletDir, 'uid-inline', 'csi-inline');
    expect(await publishInline(allowed, inline({ backend: 'exec', driver: 'acme/verbose' }))).toMatchObject({ code: 'INTERNAL' });
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toBeUndefined();
    expect(await publishInline(allowed, inline({ backend: 'exec', driver: 'acme/halfway' }))).toMatchObject({ code: 'INTERNAL', message: expect.stringContaining('quota check failed after mount') });
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toMatchObject({ lifetime: 'pod' });
    await allowed.node('NodeUnpublishVolume', { volume_id: 'csi-inline', target_path: target });
    expect(readMounts().filter((m) => m.mountPoint === target)).toHaveLength(0);
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toBeUndefined();
  });

  it('an inline publish refused before it reaches the driver leaves no record either: a driver not installed, a bad staging path', async () => {
    expect(await publishInline(allowed, inline({ backend: 'exec', driver: 'acme/missing' }))).toMatchObject({ code: 'FAILED_PRECONDITION' });
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toBeUndefined();
    const badStaging = await outcome(
      allowed.node('NodePublishVolume', { volume_id: 'csi-inline', target_path: targetPath(allowed.s.kubeletDir, 'uid-inline', 'csi-inline'), staging_target_path: '/etc/x', volume_capability: mountCap(), volume_context: inline({ backend: 'exec', driver: 'acme/tmpfs' }) }),
    );
    expect(badStaging).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('staging_target_path') });
    expect(await coreIn(allowed.s).catalog.getVolume(vid('csi-inline'))).toBeUndefined();
  });
});

describe('exec backend: --flex-exec host', () => {
  it('runs the driver through nsenter into pid 1\'s namespaces', async () => {
    const target = targetPath(host.s.kubeletDir, 'uid-h', 'h');
    const result = await outcome(host.node('NodePublishVolume', { volume_id: 'h', target_path: target, volume_capability: mountCap(), volume_context: { backend: 'exec', driver: 'acme/tmpfs' } }));
    const parents = join(dirname(host.driverPath('tmpfs')), 'parents.log');
    // Where the sandbox forbids entering pid 1's namespaces, nsenter's own refusal is the answer.
    if (result.code === 'OK') {
      expect(existsSync(parents) && readFileSync(parents, 'utf8')).toContain('nsenter');
      await host.node('NodeUnpublishVolume', { volume_id: 'h', target_path: target });
    } else {
      expect(result.message).toContain('nsenter');
    }
  });
});
