import { mkdirSync } from 'node:fs';
import { beforeAll, describe } from 'vitest';
import { mountCap, stagingPath } from '../csi/helpers/requests.js';
import { flexOptions } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { type Ask, OTHER_NODE, THIS_NODE, useFrontEnds, verdictTable } from './front-ends.js';

/**
 * The attachment rules of the core (shared/core/attachments.ts, shared/core/volumes.ts), asked of
 * the admin CLI, the FlexVolume executable and the CSI server over one catalog: one verdict each.
 */
const fronts = useFrontEnds();
const { csi, cli, flex, grpc } = fronts;
const opts = (id: string) => flexOptions(`pv-${id}`, { volumeId: id });

beforeAll(async () => {
  await fronts.create('loose', '--size', '16Mi');
  await fronts.create('held-csi', '--size', '16Mi');
  await fronts.attach('csi', 'held-csi', OTHER_NODE);
  await fronts.create('held-flex', '--backend', 'dir', '--size', '1Mi');
  await fronts.attach('flex', 'held-flex', OTHER_NODE);
  await fronts.create('shared', '--backend', 'dir', '--size', '1Mi', '--access', 'multi-node');
  await fronts.attach('flex', 'shared', OTHER_NODE);
  await fronts.create('idle', '--backend', 'dir', '--size', '1Mi');
});

/** Each model's node-side set-up of a volume on THIS_NODE. */
function setUpHere(id: string): Record<string, Ask> {
  const csiStaging = stagingPath(csi.s.kubeletDir, id);
  mkdirSync(csiStaging, { recursive: true });
  return {
    'flex waitforattach': flex('waitforattach', '', opts(id)),
    'flex mountdevice': flex('mountdevice', deviceMountPath(csi.s.kubeletDir, `pv-${id}`), '', opts(id)),
    'csi NodeStageVolume': grpc(() => csi.node('NodeStageVolume', { volume_id: id, staging_target_path: csiStaging, volume_capability: mountCap() })),
  };
}

/** Each model's way of attaching a volume to THIS_NODE. */
function attachHere(id: string): Record<string, Ask> {
  return {
    'flex attach': flex('attach', opts(id), THIS_NODE),
    'csi ControllerPublishVolume': grpc(() => csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: THIS_NODE, volume_capability: mountCap() })),
  };
}

function deleteIt(id: string): Record<string, Ask> {
  return {
    'cli volume delete': cli('delete', id),
    'csi DeleteVolume': grpc(() => csi.ctl('DeleteVolume', { volume_id: id })),
  };
}

describe('attached to this node before node-side set-up (requireAttachedTo)', () => {
  verdictTable([
    {
      rule: 'a volume attached to no node is not set up on this one',
      asks: () => setUpHere('loose'),
      refused: true,
      reason: /volume loose is not attached to node node-a/,
      code: 'FAILED_PRECONDITION',
    },
    ...(['held-csi', 'held-flex'] as const).map((id) => ({
      rule: `a volume attached to another node through ${id === 'held-csi' ? 'CSI' : 'FlexVolume'} is not set up on this one`,
      asks: () => setUpHere(id),
      refused: true,
      reason: new RegExp(`volume ${id} is attached to node node-b, not to this node node-a`),
      code: 'FAILED_PRECONDITION' as const,
    })),
  ]);
});

describe('single-node exclusivity across both models (attach)', () => {
  verdictTable([
    ...(['held-csi', 'held-flex'] as const).map((id) => ({
      rule: `a single-node volume attached through ${id === 'held-csi' ? 'CSI' : 'FlexVolume'} is refused to another node by both, naming the holder`,
      asks: () => ({
        ...attachHere(id),
        // A non-attachable FlexVolume mount stages implicitly and attaches through the same rule.
        'flex mount (implicit attach)': flex('mount', podVolumeDir(csi.s.kubeletDir, `pod-${id}`, `pv-${id}`), opts(id)),
      }),
      refused: true,
      reason: new RegExp(`volume ${id} is attached to node node-b; a single-node volume attaches to one node at a time`),
      code: 'FAILED_PRECONDITION' as const,
    })),
    { rule: 'a multi-node volume attached elsewhere attaches here too, through either model', asks: () => attachHere('shared'), refused: false },
  ]);
});

describe('delete refused while attached (deleteVolume)', () => {
  verdictTable([
    ...(['held-csi', 'held-flex'] as const).map((id) => ({
      rule: `a volume attached through ${id === 'held-csi' ? 'CSI' : 'FlexVolume'} is deleted by neither the CLI nor CSI`,
      asks: () => deleteIt(id),
      refused: true,
      reason: new RegExp(`volume ${id} is still attached to node node-b`),
      code: 'FAILED_PRECONDITION' as const,
    })),
    { rule: 'a volume attached nowhere is deleted by either, and deleting it again is fine', asks: () => deleteIt('idle'), refused: false },
  ]);
});
