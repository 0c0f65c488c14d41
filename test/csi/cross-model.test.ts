import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { attach, detach } from '../../shared/core/attachments.js';
import { type Core, openCore } from '../../shared/core/core.js';
import { publish, unpublish } from '../../shared/core/publishing.js';
import { stage, unstage } from '../../shared/core/staging.js';
import { createVolume } from '../../shared/core/volumes.js';
import { TwinvolError } from '../../shared/errors.js';
import { expectCode } from './helpers/client.js';
import { fileSha256, writeRandomFile } from './helpers/data.js';
import { useCsiServer } from './helpers/fixture.js';
import { mountInPod } from './helpers/pod-mount.js';
import { MiB, mountCap, stagingPath } from './helpers/requests.js';
import { nid, vid } from '../helpers/ids.js';

/**
 * FlexVolume and CSI share one catalog. The FlexVolume side is played by the core verbs its executable
 * calls (attach, stage, publish), run in this process against the server's data root, as the CLI and
 * the flex executable would on the same machine.
 */
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;
const flexCore = (): Core => openCore(loadConfig(csi.s.env));

/** FlexVolume's paths for a PV, as test/helpers/kubelet-paths.ts lays them out. */
const flexPaths = (pv: string) => ({
  global: join(csi.s.kubeletDir, 'plugins/kubernetes.io/flexvolume/acme/twinvol/mounts', pv),
  pod: join(csi.s.kubeletDir, 'pods/flex-pod/volumes/acme~twinvol', pv),
});


describe('one catalog for both models', () => {
  it('a volume made by the CLI and written through FlexVolume is read through CSI, and back', async () => {
    const core = flexCore();
    await createVolume(core, { id: 'shared-vol', backend: 'block', capacityBytes: 64 * MiB, createdBy: 'cli' });
    const seen = await ctl('ControllerGetVolume', { volume_id: 'shared-vol' });
    expect(seen.volume).toMatchObject({ volume_id: 'shared-vol', capacity_bytes: String(64 * MiB), volume_context: { backend: 'block', fsType: 'ext4' } });

    // FlexVolume: attach (controller-manager), mountdevice and mount (kubelet), write, tear down.
    const f = flexPaths('pv-shared');
    await attach(core, vid('shared-vol'), nid('node-a'), { readonly: false, via: 'flex' });
    await stage(core, vid('shared-vol'), f.global, { readonly: false });
    await publish(core, vid('shared-vol'), f.pod, { readonly: false, via: 'flex' });
    const fromFlex = writeRandomFile(join(f.pod, 'from-flex.bin'));
    await unpublish(core, f.pod);
    await unstage(core, f.global);
    await detach(core, vid('shared-vol'), nid('node-a'));

    const m = await mountInPod(csi, 'shared-vol', mountCap('ext4'), 'csi-pod');
    expect(fileSha256(join(m.target, 'from-flex.bin'))).toBe(fromFlex);
    const fromCsi = writeRandomFile(join(m.target, 'from-csi.bin'));
    await m.release();

    await attach(core, vid('shared-vol'), nid('node-a'), { readonly: false, via: 'flex' });
    await stage(core, vid('shared-vol'), f.global, { readonly: false });
    expect(fileSha256(join(f.global, 'from-csi.bin'))).toBe(fromCsi);
    expect(fileSha256(join(f.global, 'from-flex.bin'))).toBe(fromFlex);
    await unstage(core, f.global);
    await detach(core, vid('shared-vol'), nid('node-a'));
  });

  it('a volume attached to node A through FlexVolume cannot be published to node B through CSI', async () => {
    const core = flexCore();
    await ctl('CreateVolume', { name: 'exclusive', volume_capabilities: [mountCap()], capacity_range: { required_bytes: String(16 * MiB) } });
    await attach(core, vid('exclusive'), nid('node-flex'), { readonly: false, via: 'flex' });
    await csi.registerNodes('node-b');

    const msg = await expectCode(ctl('ControllerPublishVolume', { volume_id: 'exclusive', node_id: 'node-b', volume_capability: mountCap() }), 'FAILED_PRECONDITION');
    expect(msg).toContain('node node-flex');
    const staging = stagingPath(csi.s.kubeletDir, 'exclusive');
    mkdirSync(staging, { recursive: true });
    expect(await expectCode(node('NodeStageVolume', { volume_id: 'exclusive', staging_target_path: staging, volume_capability: mountCap() }), 'FAILED_PRECONDITION')).toContain('node node-flex');
    expect((await ctl('ControllerGetVolume', { volume_id: 'exclusive' })).status.published_node_ids).toEqual(['node-flex']);
    await expectCode(ctl('DeleteVolume', { volume_id: 'exclusive' }), 'FAILED_PRECONDITION');

    await detach(core, vid('exclusive'), nid('node-flex'));
    await ctl('ControllerPublishVolume', { volume_id: 'exclusive', node_id: 'node-b', volume_capability: mountCap() });
    expect((await ctl('ControllerGetVolume', { volume_id: 'exclusive' })).status.published_node_ids).toEqual(['node-b']);
  });

  it('a volume published through CSI cannot be attached elsewhere through FlexVolume', async () => {
    await ctl('CreateVolume', { name: 'csi-held', volume_capabilities: [mountCap()], capacity_range: { required_bytes: String(16 * MiB) } });
    await ctl('ControllerPublishVolume', { volume_id: 'csi-held', node_id: 'node-a', volume_capability: mountCap() });
    const refused = await attach(flexCore(), vid('csi-held'), nid('node-flex'), { readonly: false, via: 'flex' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TwinvolError);
    expect((refused as TwinvolError).code).toBe('FailedPrecondition');
    expect((refused as TwinvolError).message).toContain('node node-a');
    await ctl('ControllerUnpublishVolume', { volume_id: 'csi-held', node_id: 'node-a' });
  });
});
