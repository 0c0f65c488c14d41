import { createHash } from 'node:crypto';
import { join } from 'node:path';
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

/** Where kubelet stages a CSI volume: <kubelet>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount. */
export function stagingPath(kubeletDir: string, volumeId: string): string {
  const hash = createHash('sha256').update(volumeId).digest('hex');
  return join(kubeletDir, 'plugins/kubernetes.io/csi/csi.twinvol.io', hash, 'globalmount');
}

/** Where kubelet asks for a pod's volume: <kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<name>/mount. */
export function targetPath(kubeletDir: string, podUid: string, name: string): string {
  return join(kubeletDir, 'pods', podUid, 'volumes/kubernetes.io~csi', name, 'mount');
}
