import { statfsSync, statSync } from 'node:fs';
import { loopDevices, type MountEntry, mountAt, readMounts } from '../../shared/index.js';

/** What the kernel shows mounted at one path, with the parts that name one model's paths made neutral. */
export interface MountState {
  /** The source: a loop device as the volume file behind it, a bind as its filesystem and subtree. */
  device: string;
  fsType: string;
  /** Per-mount options (mountinfo field 6), sorted. */
  mountOptions: string[];
  /** Filesystem options (mountinfo's last field), sorted. */
  superOptions: string[];
  readOnly: boolean;
}

/** One path a model set up: its mount, and who owns its top directory. */
export interface PathState {
  mount: MountState | null;
  uid: number;
  gid: number;
  /** Permission bits with setgid/sticky, in octal. */
  mode: string;
}

/** A volume as one model left it published: the staging mount, the pod's mount, the filesystem's size. */
export interface VolumeState {
  staging: PathState | null;
  /**
   * The staging is its record alone by design, mounting nothing (MountRecord.recordOnly, as twinvol-csi
   * stages a dir volume: shared/core/staging.ts), so that its path has no mount to compare.
   */
  stagedByRecord: boolean;
  target: PathState;
  /** statfs total of the pod's mount. */
  sizeBytes: number;
}

/** Where this model's volume lives, so the state can be told without its names (each model has its own volume). */
export interface Neutral {
  volumeDir: string;
  scratchRoot: string;
}

export interface Difference {
  /** "staging" or "target" (the pod's mount), or "volume". */
  where: string;
  field: string;
  flex: string;
  csi: string;
}

/** The state at `path`, read from /proc/self/mountinfo and stat. */
export function pathState(path: string, n: Neutral, mounts: readonly MountEntry[] = readMounts()): PathState {
  const st = statSync(path);
  const entry = mountAt(path, mounts);
  return { mount: entry ? mountState(entry, n) : null, uid: st.uid, gid: st.gid, mode: (st.mode & 0o7777).toString(8).padStart(4, '0') };
}

export function volumeState(staging: string | undefined, target: string, n: Neutral, stagedByRecord: boolean): VolumeState {
  const mounts = readMounts();
  const fs = statfsSync(target);
  return { staging: staging === undefined ? null : pathState(staging, n, mounts), stagedByRecord, target: pathState(target, n, mounts), sizeBytes: fs.blocks * fs.bsize };
}

function mountState(m: MountEntry, n: Neutral): MountState {
  return {
    device: neutralDevice(m, n),
    fsType: m.fsType,
    mountOptions: [...m.mountOptions].sort(),
    superOptions: [...m.superOptions].sort(),
    readOnly: m.mountOptions.includes('ro'),
  };
}

/** A loop device is told by the file behind it, a bind by its filesystem's source and the subtree bound. */
function neutralDevice(m: MountEntry, n: Neutral): string {
  if (/^\/dev\/loop\d+$/.test(m.source)) {
    const backing = loopDevices().find((l) => l.device === m.source)?.backingFile ?? '(detached)';
    return `loop:${neutralPath(backing, n)}`;
  }
  return m.root === '/' ? m.source : `${m.source}:${neutralPath(m.root, n)}`;
}

function neutralPath(p: string, n: Neutral): string {
  if (p === n.volumeDir || p.startsWith(`${n.volumeDir}/`)) return `<volume>${p.slice(n.volumeDir.length)}`;
  // A bind's root is the path inside its filesystem: the scratch dir may sit anywhere below that mount.
  const at = p.indexOf(n.volumeDir.slice(n.scratchRoot.length));
  if (at >= 0 && n.volumeDir.startsWith(n.scratchRoot)) return `<volume>${p.slice(at + n.volumeDir.length - n.scratchRoot.length)}`;
  return p.startsWith(n.scratchRoot) ? `<scratch>${p.slice(n.scratchRoot.length)}` : p;
}

/**
 * Every field in which the two models left the volume differently. Pure: the tests plant differences here.
 * A staging one model left unmounted because it is that model's record alone (`stagedByRecord`:
 * twinvol-csi's dir volume, where kubelet's FlexVolume needs a mount point) has no mount to compare;
 * that difference is the stage step's, shown by its tools, and what a pod sees is its target, compared
 * whole. Any other staging left unmounted is a difference.
 */
export function diffStates(flex: VolumeState, csi: VolumeState): Difference[] {
  const out: Difference[] = [];
  const add = (where: string, field: string, a: unknown, b: unknown) => {
    const fa = show(a);
    const fb = show(b);
    if (fa !== fb) out.push({ where, field, flex: fa, csi: fb });
  };
  const paths: [string, PathState | null, PathState | null][] = [
    ['staging', flex.staging, csi.staging],
    ['target', flex.target, csi.target],
  ];
  for (const [where, a, b] of paths) {
    if (!a || !b) {
      add(where, 'present', Boolean(a), Boolean(b));
      continue;
    }
    if (where === 'staging' && ((!a.mount && flex.stagedByRecord) || (!b.mount && csi.stagedByRecord))) continue;
    add(where, 'mounted', Boolean(a.mount), Boolean(b.mount));
    if (a.mount && b.mount) {
      for (const field of ['device', 'fsType', 'mountOptions', 'superOptions', 'readOnly'] as const) add(where, field, a.mount[field], b.mount[field]);
    }
    add(where, 'owner', `${a.uid}:${a.gid}`, `${b.uid}:${b.gid}`);
    add(where, 'mode', a.mode, b.mode);
  }
  add('volume', 'sizeBytes', flex.sizeBytes, csi.sizeBytes);
  return out;
}

function show(v: unknown): string {
  return Array.isArray(v) ? v.join(',') : String(v);
}
