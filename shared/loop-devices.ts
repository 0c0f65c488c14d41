import { readdirSync, readFileSync } from 'node:fs';
import { errnoCode } from './errors.js';

/** A bound loop device as sysfs describes it. */
export interface LoopDevice {
  /** `/dev/loopN`. */
  device: string;
  /** The backing file's path as the kernel reports it, ` (deleted)` cut off (see `deleted`). */
  backingFile: string;
  /** The backing file was unlinked while the device held it open. */
  deleted: boolean;
  /** The kernel refuses writes to it (a read-only raw block publish's device). */
  readOnly: boolean;
}

type BoundLoop = Omit<LoopDevice, 'readOnly'>;

/**
 * Bound loop devices, read from sysfs, which costs no spawn. The kernel, not a record, is the truth:
 * after a crash between losetup and a record write, or a reboot, this still answers right. A
 * generator, so that a lookup stops at its device.
 */
function* boundLoops(): Generator<BoundLoop> {
  let names: string[];
  try {
    names = readdirSync('/sys/block').filter((n) => n.startsWith('loop'));
  } catch {
    return;
  }
  for (const name of names) {
    let backing: string;
    try {
      backing = readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim();
    } catch {
      continue;
    }
    const deleted = backing.endsWith(DELETED);
    yield { device: `/dev/${name}`, backingFile: deleted ? backing.slice(0, -DELETED.length) : backing, deleted };
  }
}

const DELETED = ' (deleted)';

/** Every bound loop device (`twinvol status`: shared/core/inventory.ts). */
export function loopDevices(): LoopDevice[] {
  return [...boundLoops()].map((loop) => ({ ...loop, readOnly: isReadOnly(loop.device) }));
}

/**
 * The loop device backed by `image` that takes writes (a stage's), or with `readOnly` one that refuses
 * them (a read-only raw block publish's: shared/backends/block.ts readOnlyDevice), if one is bound; a
 * deleted image's device still counts.
 */
export function findLoopDevice(image: string, readOnly = false): string | undefined {
  for (const loop of boundLoops()) if (loop.backingFile === image && isReadOnly(loop.device) === readOnly) return loop.device;
  return undefined;
}

/** Every loop device backed by `image`, writable or not. */
export function findLoopDevices(image: string): string[] {
  return [...boundLoops()].filter((loop) => loop.backingFile === image).map((loop) => loop.device);
}

/** Whether the kernel refuses writes to the device (sysfs `ro`: LO_FLAGS_READ_ONLY, or an image it could not open for writing). */
export function isReadOnly(device: string): boolean {
  try {
    return readFileSync(`/sys/block/${device.replace(/^\/dev\//, '')}/ro`, 'utf8').trim() === '1';
  } catch {
    return false;
  }
}

/**
 * Whether `device` still waits for a `losetup --detach`. Not when the kernel releases it by itself at
 * its last close (LO_FLAGS_AUTOCLEAR, set on a device bound for one mount: shared/mounter.ts
 * mountImage), where a detach would only set that flag again; nor when it is no longer bound (its sysfs
 * `loop` directory goes with the binding, so a device released since it was found reads as gone).
 */
export function needsDetach(device: string): boolean {
  try {
    return readFileSync(`/sys/block/${device.replace(/^\/dev\//, '')}/loop/autoclear`, 'utf8').trim() !== '1';
  } catch (err) {
    return errnoCode(err) !== 'ENOENT';
  }
}

/** "major:minor" of a block device, as /proc/self/mountinfo names the device a filesystem is mounted from. */
export function blockDeviceNumber(device: string): string {
  try {
    return readFileSync(`/sys/class/block/${device.replace(/^\/dev\//, '')}/dev`, 'utf8').trim();
  } catch {
    return '';
  }
}
