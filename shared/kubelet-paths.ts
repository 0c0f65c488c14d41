import { join } from 'node:path';
import { invalidArgument } from './errors.js';
import { sha256Hex } from './sha256.js';

/**
 * Where kubelet puts a volume, as its volume plugins lay the kubelet dir out: kubelet hands these
 * paths to a driver, and twinvol's tools that play kubelet (`twinvol compare`, `migrate verify`,
 * `flex check`, the demo) and its tests make the same ones. One place, so they cannot drift apart.
 * shared/core/inventory-kernel.ts reads the same layout back from mountinfo.
 */

/** The CSI driver name twinvol-csi serves unless told otherwise (csi/flags.ts --driver-name). */
export const DEFAULT_CSI_DRIVER_NAME = 'csi.twinvol.io';

/** Domain style, at most 63 characters, alphanumeric at both ends (CSI GetPluginInfo). */
const CSI_DRIVER_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,61}[A-Za-z0-9])?$/;

/**
 * A CSI driver name, as twinvol-csi serves it and `twinvol status` looks for it in kubelet's paths:
 * one check for both, so a name the server would refuse is not silently matched against nothing.
 */
export function validateCsiDriverName(value: string, what: string): string {
  if (!CSI_DRIVER_NAME.test(value)) throw invalidArgument(`${what} must be a domain-style name of at most 63 characters`);
  return value;
}

/** A FlexVolume driver as kubelet names it: the `<vendor>~<name>` directory of its executable. */
export interface FlexDriverName {
  vendor: string;
  name: string;
}

/** pkg/volume/flexvolume getDeviceMountPath: `<kubelet>/plugins/kubernetes.io/flexvolume/<vendor>/<name>/mounts/<pv>`. */
export function flexGlobalMountPath(kubeletDir: string, driver: FlexDriverName, pvName: string): string {
  return join(kubeletDir, 'plugins/kubernetes.io/flexvolume', driver.vendor, driver.name, 'mounts', pvName);
}

/** A pod's FlexVolume directory: `<kubelet>/pods/<uid>/volumes/<vendor>~<name>/<pv>`. */
export function flexPodVolumePath(kubeletDir: string, podUid: string, driver: FlexDriverName, pvName: string): string {
  return join(kubeletDir, 'pods', podUid, 'volumes', `${driver.vendor}~${driver.name}`, pvName);
}

/** The directory name kubelet gives a CSI volume's staging: the hex sha256 of its volume handle. */
export function volumeHandleHash(volumeHandle: string): string {
  return sha256Hex(volumeHandle);
}

/** pkg/volume/csi: `<kubelet>/plugins/kubernetes.io/csi/<driver>/<sha256(volume handle)>/globalmount`. */
export function csiGlobalMountPath(kubeletDir: string, volumeHandle: string, driverName = DEFAULT_CSI_DRIVER_NAME): string {
  return join(kubeletDir, 'plugins/kubernetes.io/csi', driverName, volumeHandleHash(volumeHandle), 'globalmount');
}

/** A pod's CSI volume: `<kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`. */
export function csiPodMountPath(kubeletDir: string, podUid: string, pvName: string): string {
  return join(kubeletDir, 'pods', podUid, 'volumes/kubernetes.io~csi', pvName, 'mount');
}
