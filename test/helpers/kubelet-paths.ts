import { join } from 'node:path';

/** The paths kubelet hands a FlexVolume driver "acme~twinvol" (kubelet's pkg/volume/flexvolume lays them out so). */
export function deviceMountPath(kubeletDir: string, pvName: string): string {
  return join(kubeletDir, 'plugins/kubernetes.io/flexvolume/acme/twinvol/mounts', pvName);
}

export function podVolumeDir(kubeletDir: string, podUid: string, volumeName: string): string {
  return join(kubeletDir, 'pods', podUid, 'volumes/acme~twinvol', volumeName);
}
