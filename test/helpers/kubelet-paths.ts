import { flexGlobalMountPath, flexPodVolumePath } from '../../shared/index.js';

/** The FlexVolume driver the tests install: "acme~twinvol". */
const ACME = { vendor: 'acme', name: 'twinvol' };

/** The paths kubelet hands the FlexVolume driver "acme~twinvol" (shared/kubelet-paths.ts). */
export function deviceMountPath(kubeletDir: string, pvName: string): string {
  return flexGlobalMountPath(kubeletDir, ACME, pvName);
}

export function podVolumeDir(kubeletDir: string, podUid: string, volumeName: string): string {
  return flexPodVolumePath(kubeletDir, podUid, ACME, volumeName);
}
