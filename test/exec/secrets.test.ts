import { truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountCap, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { optionsOf, useExecServer } from './helpers.js';

/**
 * Which FlexVolume calls see a volume's secrets. kubelet reads the PV's secretRef into
 * kubernetes.io/secret/<key> options in one place, mounter.go SetUpAt (util.go addSecretsToOptions has
 * no other caller): attach, waitforattach, mountdevice, isattached, expandvolume and expandfs get
 * AppendSpec with no extra options, and detach, unmountdevice and unmount no options at all. So the
 * exec backend hands a driver only NodePublishVolume's secrets, on `mount`, and the secrets every other
 * CSI call carries (ControllerPublish, NodeStage, the expansions, ControllerUnpublish) reach no call.
 * Each call gets a secret of its own, so a secret that reached the wrong call would say whose it is.
 */
const csi = useExecServer();
const ID = 'flex-secrets-1';
const SECRETS = {
  controllerPublish: 'S3CR3T-ctl-publish-41',
  nodeStage: 'S3CR3T-node-stage-42',
  nodePublish: 'S3CR3T-node-publish-43',
  controllerExpand: 'S3CR3T-ctl-expand-44',
  nodeExpand: 'S3CR3T-node-expand-45',
  controllerUnpublish: 'S3CR3T-ctl-unpublish-46',
} as const;
const secret = (which: keyof typeof SECRETS) => ({ password: SECRETS[which] });
const forms = (value: string) => [value, Buffer.from(value).toString('base64')];

describe('exec backend: secrets reach the driver on mount alone, as kubelet passes them', () => {
  it('an attachable, resizing driver through its whole life: only mount holds kubernetes.io/secret/ keys, and only the publish\'s', async () => {
    const image = join(csi.s.root, 'secrets.img');
    writeFileSync(image, '');
    truncateSync(image, 32 * 2 ** 20);
    const ctx = { backend: 'exec', driver: 'acme/loopresize', fsType: 'ext4', image };
    const cap = mountCap('ext4');
    const pub = await csi.ctl('ControllerPublishVolume', { volume_id: ID, node_id: 'node-a', volume_capability: cap, volume_context: ctx, secrets: secret('controllerPublish') });
    const staging = stagingPath(csi.s.kubeletDir, ID);
    await csi.node('NodeStageVolume', { volume_id: ID, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: cap, volume_context: ctx, secrets: secret('nodeStage') });
    const target = targetPath(csi.s.kubeletDir, 'uid-secrets', ID);
    await csi.node('NodePublishVolume', { volume_id: ID, staging_target_path: staging, target_path: target, volume_capability: cap, volume_context: ctx, secrets: secret('nodePublish') });
    // isattached: the controller asks where the CO asks what is attached.
    await csi.ctl('ControllerGetVolume', { volume_id: ID });
    await csi.ctl('ControllerExpandVolume', { volume_id: ID, capacity_range: { required_bytes: String(64 * 2 ** 20) }, secrets: secret('controllerExpand') });
    await csi.node('NodeExpandVolume', { volume_id: ID, volume_path: target, staging_target_path: staging, capacity_range: { required_bytes: String(64 * 2 ** 20) }, secrets: secret('nodeExpand') });
    await csi.node('NodeUnpublishVolume', { volume_id: ID, target_path: target });
    await csi.node('NodeUnstageVolume', { volume_id: ID, staging_target_path: staging });
    await csi.ctl('ControllerUnpublishVolume', { volume_id: ID, node_id: 'node-a', secrets: secret('controllerUnpublish') });

    const calls = csi.calls('loopresize').filter((c) => c[0] !== 'init');
    expect(calls.map((c) => c[0])).toEqual(['attach', 'waitforattach', 'mountdevice', 'mount', 'isattached', 'expandvolume', 'expandfs', 'unmount', 'unmountdevice', 'detach']);
    const secretKeys = (call: string[]) => call.slice(1).flatMap((arg) => (arg.startsWith('{') ? Object.keys(optionsOf([arg], 0)).filter((k) => k.startsWith('kubernetes.io/secret/')) : []));
    const seen = Object.fromEntries(calls.map((c) => [c[0], secretKeys(c)]));
    expect(seen).toEqual({ attach: [], waitforattach: [], mountdevice: [], mount: ['kubernetes.io/secret/password'], isattached: [], expandvolume: [], expandfs: [], unmount: [], unmountdevice: [], detach: [] });
    const mount = calls.find((c) => c[0] === 'mount');
    expect(optionsOf(mount, 2)['kubernetes.io/secret/password']).toBe(Buffer.from(SECRETS.nodePublish).toString('base64'));
    // No other secret, in either form, in any argument of any call; none at all in the server's log.
    const others = Object.values(SECRETS).filter((s) => s !== SECRETS.nodePublish).flatMap(forms);
    const argv = calls.flat().join('\n');
    expect(others.filter((s) => argv.includes(s))).toEqual([]);
    const log = csi.server.logLines().join('\n');
    expect(Object.values(SECRETS).flatMap(forms).filter((s) => log.includes(s))).toEqual([]);
  });
});
