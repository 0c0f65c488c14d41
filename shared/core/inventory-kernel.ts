import { readFileSync, realpathSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { blockDeviceNumber, type LoopDevice } from '../loop-devices.js';
import type { MountEntry } from '../mountinfo.js';
import { SCRATCH_BINDS } from '../bind-by-move.js';

/**
 * What in the kernel's tables belongs to twinvol, for `twinvol status` (shared/core/inventory.ts): a
 * mount is twinvol's by where it is (the paths kubelet gives twinvol's FlexVolume driver and CSI
 * driver, twinvol's own implicit stagings) or by what it mounts (a loop device backed by a volume's
 * image, a directory of a volume under the data root). Paths kubelet lays out: pkg/volume/flexvolume
 * (plugins/kubernetes.io/flexvolume/<vendor>/<driver>/mounts/<pv>, pods/<uid>/volumes/<vendor>~<driver>/<name>)
 * and pkg/volume/csi (plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount,
 * pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount beside a vol_data.json naming the driver).
 */

/** The file name of twinvol's FlexVolume driver under `<vendor>~twinvol/` (flex/install.ts). */
const FLEX_DRIVER = 'twinvol';

export interface KernelView {
  /** The data root with symlinks resolved, as the kernel reports paths below it. */
  realDataRoot: string;
  /** Loop devices backed by a file under the data root, with the volume whose image it is. */
  loops: { loop: LoopDevice; volumeId?: string }[];
  /** The volume a mount holds, judged by its source alone; undefined when it is not twinvol's data. */
  volumeOfSource(mount: MountEntry): string | undefined;
}

export function kernelView(dataRoot: string, mounts: readonly MountEntry[], loops: readonly LoopDevice[]): KernelView {
  const realDataRoot = realpathOr(dataRoot);
  const ours = loops
    .filter((loop) => loop.backingFile.startsWith(`${realDataRoot}/`))
    .map((loop) => {
      const m = /^volumes\/([^/]+)\/image\.img$/.exec(relative(realDataRoot, loop.backingFile));
      return { loop, ...(m?.[1] ? { volumeId: m[1] } : {}) };
    });
  const byDevice = new Map<string, string>();
  for (const { loop, volumeId } of ours) {
    const number = volumeId ? blockDeviceNumber(loop.device) : '';
    if (number && volumeId) byDevice.set(number, volumeId);
  }
  // A bind of a dir volume shows the device of the filesystem holding the data root and, as its root,
  // the volume's directory as a path inside that filesystem.
  const holder = containingMount(realDataRoot, mounts);
  const volumesWithin = holder && join(holder.root, relative(holder.mountPoint, realDataRoot), 'volumes');
  return {
    realDataRoot,
    loops: ours,
    volumeOfSource(mount) {
      const byLoop = byDevice.get(mount.device);
      if (byLoop) return byLoop;
      if (!holder || !volumesWithin || mount.device !== holder.device || !mount.root.startsWith(`${volumesWithin}/`)) return undefined;
      return mount.root.slice(volumesWithin.length + 1).split('/')[0] || undefined;
    },
  };
}

/** What a path twinvol's drivers are given is, or undefined when it is not one of them. */
export interface TwinvolPath {
  /** A scratch bind: a bind with flags made under `<stateDir>/binds` before it is moved onto its target (shared/bind-by-move.ts). */
  what: 'FlexVolume device mount' | 'FlexVolume pod mount' | 'CSI staging' | 'CSI pod mount' | 'implicit staging' | 'scratch bind';
  /** The volume the path names, when it names one: an implicit staging's id, a CSI pod mount's handle. */
  volumeId?: string;
  /** A CSI staging path names only sha256 of the volume handle (pkg/volume/csi/csi_attacher.go). */
  handleHash?: string;
}

export function twinvolPath(path: string, dirs: { kubeletDir: string; stateDir: string; driverName: string }): TwinvolPath | undefined {
  const underState = below(dirs.stateDir, path);
  if (underState !== undefined) {
    const m = /^staging\/([^/]+)$/.exec(underState);
    if (new RegExp(`^${SCRATCH_BINDS}/[^/]+$`).test(underState)) return { what: 'scratch bind' };
    return m?.[1] ? { what: 'implicit staging', volumeId: m[1] } : undefined;
  }
  const rel = below(dirs.kubeletDir, path);
  if (rel === undefined) return undefined;
  if (new RegExp(`^plugins/kubernetes\\.io/flexvolume/[^/]+/${FLEX_DRIVER}/mounts/[^/]+$`).test(rel)) return { what: 'FlexVolume device mount' };
  if (new RegExp(`^pods/[^/]+/volumes/[^/~]+~${FLEX_DRIVER}/[^/]+$`).test(rel)) return { what: 'FlexVolume pod mount' };
  const staging = /^plugins\/kubernetes\.io\/csi\/([^/]+)\/([0-9a-f]{64})\/globalmount$/.exec(rel);
  if (staging?.[1] === dirs.driverName && staging[2]) return { what: 'CSI staging', handleHash: staging[2] };
  const pod = /^(pods\/[^/]+\/volumes\/kubernetes\.io~csi\/[^/]+)\/mount$/.exec(rel);
  if (pod?.[1]) {
    const data = volData(join(dirs.kubeletDir, pod[1], 'vol_data.json'));
    if (data?.driverName === dirs.driverName) return { what: 'CSI pod mount', ...(data.volumeHandle ? { volumeId: data.volumeHandle } : {}) };
  }
  return undefined;
}


/** kubelet's vol_data.json beside a CSI pod mount (pkg/volume/csi/csi_util.go), if it reads. */
function volData(path: string): { driverName?: string; volumeHandle?: string } | undefined {
  try {
    const v: unknown = JSON.parse(readFileSync(path, 'utf8'));
    if (typeof v !== 'object' || v === null) return undefined;
    const { driverName, volumeHandle } = v as Record<string, unknown>;
    return { ...(typeof driverName === 'string' ? { driverName } : {}), ...(typeof volumeHandle === 'string' ? { volumeHandle } : {}) };
  } catch {
    return undefined;
  }
}

/** `path` relative to `root` when it lies strictly below it. */
function below(root: string, path: string): string | undefined {
  for (const r of new Set([root, realpathOr(root)])) if (path.startsWith(`${r}${sep}`)) return path.slice(r.length + 1);
  return undefined;
}

/** The mount `path` lies on: the last (visible) one of the longest mount point above it. */
function containingMount(path: string, mounts: readonly MountEntry[]): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const m of mounts) {
    const above = m.mountPoint === '/' || path === m.mountPoint || path.startsWith(`${m.mountPoint}/`);
    if (above && (!best || m.mountPoint.length >= best.mountPoint.length)) best = m;
  }
  return best;
}

function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * The writable loop device of the volume that the device node bound at `path` opens, if it is one:
 * a read-only raw block publish made before read-only devices (shared/backends/block.ts
 * readOnlyDevice) binds the staging's device, which its pod can write.
 */
export function writableLoopAt(path: string, volumeId: string, loops: KernelView['loops']): string | undefined {
  let rdev: number;
  try {
    rdev = statSync(path).rdev;
  } catch {
    return undefined;
  }
  const bound = loops.find(({ loop, volumeId: id }) => id === volumeId && deviceId(loop.device) === rdev);
  return bound && !bound.loop.readOnly ? bound.loop.device : undefined;
}

function deviceId(device: string): number | undefined {
  try {
    return statSync(device).rdev;
  } catch {
    return undefined;
  }
}
