import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { VolumeCapability } from '../../../csi/csi-types.js';
import type { Partial2 } from './client.js';
import type { CsiSuite } from './fixture.js';
import { MiB, mountCap, size, stagingPath, targetPath } from './requests.js';

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

export interface ReadyOptions {
  backend?: 'dir' | 'block';
  cap?: Partial2<VolumeCapability>;
  bytes?: number;
}

export interface ReadyVolume {
  staging: string;
  target(pod: string): string;
  cap: Partial2<VolumeCapability>;
}

/** A volume made and published to node-a, its staging dir made as kubelet leaves it before NodeStage. */
export async function readyVolume(csi: CsiSuite, id: string, opts: ReadyOptions = {}): Promise<ReadyVolume> {
  const cap = opts.cap ?? mountCap();
  const bytes = opts.bytes ?? 64 * MiB;
  await csi.ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: csi.flavour.parameters(opts.backend, bytes), capacity_range: size(bytes) });
  await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
  const staging = stagingPath(csi.s.kubeletDir, id);
  mkdirSync(staging, { recursive: true });
  return { staging, target: (pod: string) => targetPath(csi.s.kubeletDir, pod, id), cap };
}

/** The same, staged. */
export async function stagedVolume(csi: CsiSuite, id: string, opts: ReadyOptions = {}): Promise<ReadyVolume> {
  const v = await readyVolume(csi, id, opts);
  await csi.node('NodeStageVolume', { volume_id: id, staging_target_path: v.staging, volume_capability: v.cap });
  return v;
}
