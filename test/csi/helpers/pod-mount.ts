import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { VolumeCapability } from '../../../csi/messages.js';
import type { Partial2 } from './client.js';
import type { CsiSuite } from './fixture.js';
import { stagingPath, targetPath } from './requests.js';

export interface PodMount {
  target: string;
  /** Unpublish, unstage and controller-unpublish, in the CO's order. */
  release(): Promise<void>;
}

/** Publishes a volume to the suite's node and into a pod target, the way the CO does. */
export async function mountInPod(csi: CsiSuite, id: string, cap: Partial2<VolumeCapability>, podUid = `pod-${id}`, nodeId = 'node-a'): Promise<PodMount> {
  const { ctl, node } = csi;
  const staging = stagingPath(csi.s.kubeletDir, id);
  const target = targetPath(csi.s.kubeletDir, podUid, id);
  mkdirSync(staging, { recursive: true });
  mkdirSync(dirname(target), { recursive: true });
  await ctl('ControllerPublishVolume', { volume_id: id, node_id: nodeId, volume_capability: cap });
  await node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap });
  await node('NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: cap });
  return {
    target,
    async release() {
      await node('NodeUnpublishVolume', { volume_id: id, target_path: target });
      await node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
      await ctl('ControllerUnpublishVolume', { volume_id: id, node_id: nodeId });
    },
  };
}
