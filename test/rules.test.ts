import { mkdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { outcome } from './csi/helpers/client.js';
import { useCsiServer } from './csi/helpers/fixture.js';
import { MiB, blockCap, mountCap, size, stagingPath } from './csi/helpers/requests.js';
import { flexOptions, runCli, runFlex } from './helpers/flex-runner.js';
import { deviceMountPath } from './helpers/kubelet-paths.js';

/**
 * Every rule of the core (docs/architecture.md, "Where each rule lives"), asked of the three front ends
 * over one catalog: the admin CLI and the FlexVolume executable as processes, the CSI server over its
 * socket. Each row expects the same verdict from each, and a message naming the same reason.
 */
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;

type Verdict = { refused: boolean; message: string };

const cli = async (...args: string[]): Promise<Verdict> => {
  const r = await runCli(csi.s.env, args);
  return { refused: r.exitCode !== 0, message: r.stderr };
};
const flex = async (...argv: string[]): Promise<Verdict> => {
  const r = await runFlex(csi.s.env, argv);
  return { refused: r.reply.status !== 'Success', message: String(r.reply.message ?? '') };
};
const grpc = async (call: Promise<unknown>): Promise<Verdict> => {
  const o = await outcome(call);
  return { refused: o.code !== 'OK', message: o.message };
};

function expectSame(verdicts: Record<string, Verdict>, refused: boolean, reason: RegExp): void {
  for (const [front, v] of Object.entries(verdicts)) {
    expect(v.refused, `${front}: ${v.message}`).toBe(refused);
    if (refused) expect(v.message, front).toMatch(reason);
  }
}

describe('one verdict per rule from the CLI, the FlexVolume executable and the CSI server', () => {
  it('access against backend: a block volume is never a multi-node filesystem', async () => {
    expectSame(
      {
        cli: await cli('create', 'multi-cli', '--backend', 'block', '--size', '16Mi', '--access', 'multi-node'),
        flex: await flex('attach', flexOptions('pv-multi', { volumeId: 'multi-flex', createIfMissing: 'true', size: '16Mi', access: 'multi-node' }), 'node-a'),
        csi: await grpc(ctl('CreateVolume', { name: 'multi-csi', volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')], capacity_range: size(16 * MiB) })),
      },
      true,
      /one node at a time can mount/,
    );
    expect((await ctl('ListVolumes', {})).entries).toEqual([]);
    // The same rule lets a multi-node dir volume through every front end.
    expectSame(
      {
        cli: await cli('create', 'shared-cli', '--backend', 'dir', '--size', '1Mi', '--access', 'multi-node'),
        flex: await flex('attach', flexOptions('pv-shared', { volumeId: 'shared-flex', createIfMissing: 'true', backend: 'dir', size: '1Mi', access: 'multi-node' }), 'node-a'),
        csi: await grpc(ctl('CreateVolume', { name: 'shared-csi', parameters: { backend: 'dir' }, volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')], capacity_range: size(MiB) })),
      },
      false,
      /./,
    );
  });

  it('single-node exclusivity: a volume held by one node is refused to another, naming the holder', async () => {
    expect((await cli('create', 'held', '--size', '16Mi')).refused).toBe(false);
    await csi.registerNodes('node-b');
    await ctl('ControllerPublishVolume', { volume_id: 'held', node_id: 'node-b', volume_capability: mountCap() });
    expectSame(
      {
        flex: await flex('attach', flexOptions('pv-held', { volumeId: 'held' }), 'node-a'),
        csi: await grpc(ctl('ControllerPublishVolume', { volume_id: 'held', node_id: 'node-a', volume_capability: mountCap() })),
      },
      true,
      /attached to node node-b/,
    );
  });

  it('attached before stage: node-side set-up needs the attachment to this node first', async () => {
    expect((await cli('create', 'loose', '--size', '16Mi')).refused).toBe(false);
    const flexStaging = deviceMountPath(csi.s.kubeletDir, 'pv-loose');
    const csiStaging = stagingPath(csi.s.kubeletDir, 'loose');
    mkdirSync(csiStaging, { recursive: true });
    expectSame(
      {
        waitforattach: await flex('waitforattach', '', flexOptions('pv-loose', { volumeId: 'loose' })),
        mountdevice: await flex('mountdevice', flexStaging, '', flexOptions('pv-loose', { volumeId: 'loose' })),
        csi: await grpc(node('NodeStageVolume', { volume_id: 'loose', staging_target_path: csiStaging, volume_capability: mountCap() })),
      },
      true,
      /not attached to node node-a/,
    );
  });

  it('a request may repeat the catalog, never contradict it', async () => {
    expect((await cli('create', 'told', '--size', '16Mi')).refused).toBe(false);
    await ctl('ControllerPublishVolume', { volume_id: 'told', node_id: 'node-a', volume_capability: mountCap() });
    const csiStaging = stagingPath(csi.s.kubeletDir, 'told');
    mkdirSync(csiStaging, { recursive: true });
    expectSame(
      {
        flex: await flex('mountdevice', deviceMountPath(csi.s.kubeletDir, 'pv-told'), '', flexOptions('pv-told', { volumeId: 'told', source: '/etc' })),
        csi: await grpc(node('NodeStageVolume', { volume_id: 'told', staging_target_path: csiStaging, volume_capability: mountCap(), volume_context: { source: '/etc' } })),
      },
      true,
      /does not match volume told/,
    );
    // Repeating what the catalog holds is fine.
    const fine = await grpc(ctl('ValidateVolumeCapabilities', { volume_id: 'told', volume_capabilities: [blockCap()], volume_context: { backend: 'block', fsType: 'ext4' } }));
    expect(fine.refused).toBe(false);
    await ctl('ControllerUnpublishVolume', { volume_id: 'told', node_id: 'node-a' });
  });
});
