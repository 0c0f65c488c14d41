import { csiGlobalMountPath, csiPodMountPath } from '../../../shared/index.js';
import type { AccessModeName, VolumeCapability } from '../../../csi/csi-types.js';
import type { Partial2 } from './client.js';

export const MiB = 2 ** 20;
export const GiB = 2 ** 30;

export function mountCap(fsType = '', mode: AccessModeName = 'SINGLE_NODE_WRITER', extra: { mount_flags?: string[]; volume_mount_group?: string } = {}): Partial2<VolumeCapability> {
  return { mount: { fs_type: fsType, ...extra }, access_mode: { mode } };
}

export function blockCap(mode: AccessModeName = 'SINGLE_NODE_WRITER'): Partial2<VolumeCapability> {
  return { block: {}, access_mode: { mode } };
}

export const size = (bytes: number) => ({ required_bytes: String(bytes) });

/** Where kubelet stages a CSI volume of csi.twinvol.io (shared/kubelet-paths.ts). */
export function stagingPath(kubeletDir: string, volumeId: string): string {
  return csiGlobalMountPath(kubeletDir, volumeId);
}

/** Where kubelet asks for a pod's CSI volume (shared/kubelet-paths.ts). */
export function targetPath(kubeletDir: string, podUid: string, name: string): string {
  return csiPodMountPath(kubeletDir, podUid, name);
}
