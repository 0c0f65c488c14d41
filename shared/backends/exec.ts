import type { Config } from '../config.js';
import { failedPrecondition, invalidArgument, unimplemented } from '../errors.js';
import type { VolumeRecord } from '../model.js';
import { quoted } from '../validate.js';
import { type Backend, type BackendContext, type BackendPublish, formatBlank, withoutDevice } from './backend.js';
import type { DriverCapabilities } from './exec-reply.js';
import { flexGlobalMountPath } from '../kubelet-paths.js';
import type { MountTarget } from '../pinned-target.js';
import { realpath } from '../fs-async.js';
import { mountAt } from '../mountinfo.js';

/**
 * The exec backend: a volume served by a third-party FlexVolume driver that the CSI server runs as
 * kubelet would (shared/backends/exec-driver.ts, exec-volumes.ts). This module is only what the core
 * needs to keep such a volume in its catalog: FlexVolume has no provisioning, so creating one records
 * the driver and its options and makes nothing on storage, and deleting one forgets it and touches
 * nothing. It imports no process runner, so registering it here keeps execa out of everything the
 * FlexVolume executable loads.
 */

/** `<vendor>/<name>`, as a PV's flexVolume.driver names it; kubelet finds it at `<vendor>~<name>/<name>`. */
export interface DriverName {
  vendor: string;
  name: string;
  /** "vendor/name" */
  full: string;
}

// kubelet's prober takes any directory name with one "~"; a path segment must still stay a segment.
const PART = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export function parseDriverName(value: unknown, what = 'driver'): DriverName {
  const text = typeof value === 'string' ? value : '';
  const [vendor, name, ...rest] = text.split('/');
  if (rest.length || vendor === undefined || name === undefined || !PART.test(vendor) || !PART.test(name) || vendor.includes('~') || name.includes('~'))
    throw invalidArgument(`${what} ${quoted(String(value), 64)} must be <vendor>/<name> (letters, digits, ".", "_", "-")`);
  return { vendor, name, full: `${vendor}/${name}` };
}

/** The keys an exec volume's parameters or volume context use for twinvol; every other key is the driver's. */
export const EXEC_KEYS = ['backend', 'driver', 'fsType'] as const;

/** What twinvol knows of an exec volume: the driver, and the PV options handed to it verbatim. */
export interface ExecVolume {
  id: string;
  driver: DriverName;
  /** The PV's flexVolume.options, passed to the driver as they are. */
  options: Record<string, string>;
  /** The PV's flexVolume.fsType ("" when none): kubelet's kubernetes.io/fsType. */
  fsType: string;
}

/** An exec volume from its catalog record, or from a static PV's volume attributes (the same keys). */
export function execVolumeOf(id: string, map: Readonly<Record<string, string>>, fsType = map.fsType ?? ''): ExecVolume {
  const driver = parseDriverName(map.driver, 'parameter driver');
  const options: Record<string, string> = {};
  for (const [k, v] of Object.entries(map)) if (!(EXEC_KEYS as readonly string[]).includes(k)) options[k] = v;
  return { id, driver, options, fsType };
}

export function execVolumeOfRecord(volume: VolumeRecord): ExecVolume {
  return execVolumeOf(volume.id, volume.parameters, volume.fsType);
}

/** The catalog's name of this backend, for records and contexts the core writes. */
export const EXEC_BACKEND = 'exec';

/** The volume is a FlexVolume driver's (the front ends ask rather than compare names: shared/core/backend-traits.ts). */
export function isExecVolume(volume: Pick<VolumeRecord, 'backend'>): boolean {
  return volume.backend === EXEC_BACKEND;
}

/** A CreateVolume's parameters or a static PV's volume attributes ask for an exec volume. */
export function asksForExec(map: Readonly<Record<string, string>>): boolean {
  return map.backend === EXEC_BACKEND;
}

/**
 * What an exec volume's CSI volume_context is: its PV's flexVolume fields (driver, options, fsType),
 * the same keys a static PV's volumeAttributes give; undefined for any other backend.
 */
export function execVolumeContext(volume: VolumeRecord): Record<string, string> | undefined {
  if (!isExecVolume(volume)) return undefined;
  return { ...volume.parameters, backend: EXEC_BACKEND, ...(volume.fsType ? { fsType: volume.fsType } : {}) };
}

/** The parameters the catalog keeps for an exec volume: driver and options (fsType has its own field). */
export function execRecordParameters(map: Readonly<Record<string, string>>): Record<string, string> {
  return { ...Object.fromEntries(Object.entries(map).filter(([k]) => k !== 'fsType')), backend: EXEC_BACKEND };
}

/**
 * What the core asks of the driver-calling object (ExecVolumes, shared/backends/exec-volumes.ts),
 * which the CSI server hands in as the core's `flex` port (csi/server.ts). Each method makes the
 * FlexVolume calls kubelet would for one step and answers what the core needs: the device an attach
 * gave, and whether the driver did a mount step itself or answered "Not supported" (false), leaving
 * kubelet's fallback to the core.
 */
export interface FlexPort {
  capabilities(volume: ExecVolume): Promise<DriverCapabilities>;
  /** `attach`: the device ("" when the driver has none, or does not attach). */
  attach(volume: ExecVolume, node: string, readonly: boolean): Promise<string>;
  detach(volume: ExecVolume, node: string): Promise<void>;
  isAttached(volume: ExecVolume, node: string): Promise<boolean | undefined>;
  /** `waitforattach` and `mountdevice`; the device to format and mount as kubelet does when mountdevice is Not supported. */
  stage(volume: ExecVolume, path: string, device: string, readonly: boolean): Promise<string | undefined>;
  /** `unmountdevice`; false: Not supported. */
  unstage(volume: ExecVolume, path: string): Promise<boolean>;
  /** `mount`; false: Not supported. */
  publish(volume: ExecVolume, target: string, opts: BackendPublish): Promise<boolean>;
  /** `unmount`; false: Not supported. */
  unpublish(volume: ExecVolume, target: string): Promise<boolean>;
  expandVolume(volume: ExecVolume, deviceMountPath: string, newSize: number, oldSize: number): Promise<void>;
  /** `expandfs`; false: Not supported. */
  expandFs(volume: ExecVolume, deviceMountPath: string, newSize: number, oldSize: number): Promise<boolean>;
}

/**
 * kubelet's attacherDefaults.MountDevice for a driver that answers mountdevice "Not supported":
 * mount-utils' FormatAndMount, which formats a device that holds no filesystem yet with the PV's
 * fsType (ext4 when it names none) and mounts it. Drivers that attach and wait but leave the
 * filesystem to kubelet rely on it: a bare mount of their blank device failed every NodeStageVolume.
 * A device that holds a filesystem or a partition table is never formatted, and a read-only staging
 * formats nothing. A filesystem found there is checked first (`checkAndRepair`) when it is to be
 * mounted read-write, as FormatAndMount does; one it has just made is not.
 */
async function formatAndMount(ctx: BackendContext, volume: VolumeRecord, device: string, staging: MountTarget, readonly: boolean): Promise<void> {
  const probed = await ctx.mounter.probe(device);
  const found = probed.fsType;
  if (found === undefined) {
    const fsType = volume.fsType || 'ext4';
    if (fsType !== 'ext4' && fsType !== 'xfs') throw failedPrecondition(`volume ${volume.id}: device ${device} has no filesystem yet, and twinvol formats ext4 or xfs, not ${fsType}`);
    await formatBlank(ctx, volume, device, fsType, readonly, probed);
  } else if (!readonly) {
    await checkAndRepair(ctx, volume, device);
  }
  await ctx.mounter.mount(device, staging, { fsType: volume.fsType || (found ?? 'ext4'), options: [readonly ? 'ro' : 'rw'] });
}

/** fsck(8)'s exit code for errors found and left uncorrected (mount-utils mount_linux.go `fsckErrorsUncorrected`). */
const FSCK_ERRORS_UNCORRECTED = 4;

/**
 * mount-utils' checkAndRepairFilesystem, which FormatAndMount runs on a filesystem it found before
 * mounting it read-write: `fsck -a <device>`, whatever the type (fsck.xfs checks nothing). Errors it
 * corrected (exit 1) are a filesystem fit to mount; errors it could not correct unattended (exactly 4)
 * stop the stage, since a mount would hand the pod a damaged filesystem; every other code (2 reboot,
 * 8 operational error, 4 with others) kubelet logs and mounts anyway, and so does this (the spawn is
 * recorded as failed: the CSI server's command metrics and debug log).
 */
async function checkAndRepair(ctx: BackendContext, volume: VolumeRecord, device: string): Promise<void> {
  const { exitCode, detail } = await ctx.mounter.fsck(device);
  if (exitCode === FSCK_ERRORS_UNCORRECTED)
    throw failedPrecondition(`volume ${volume.id}: fsck found errors on device ${device} that it could not correct unattended${detail ? ` (${detail})` : ''}: repair the filesystem (fsck without -a) before staging it`);
}

/** The block device and filesystem type mounted at a device mount path, if a device is mounted there. */
export async function stagedMount(path: string): Promise<{ device: string; fsType: string } | undefined> {
  const mount = mountAt(await realpath(path).catch(() => path));
  return mount?.source.startsWith('/dev/') ? { device: mount.source, fsType: mount.fsType } : undefined;
}

/** The filesystems kubelet's generic resize grows (mount-utils ResizeFs), as the core's mounter does. */
const GROWABLE = new Set(['ext2', 'ext3', 'ext4', 'xfs']);

/** The publish_context key the attach's device travels under to the stage. */
export const DEVICE_KEY = 'device';

function portOf(ctx: BackendContext, volume: VolumeRecord): FlexPort {
  if (!ctx.flex) throw failedPrecondition(`volume ${volume.id} is served by its FlexVolume driver ${volume.parameters.driver ?? ''} through the CSI server's exec backend`);
  return ctx.flex;
}

/**
 * kubelet's device mount path of a FlexVolume volume (flexvolume plugin.go getDeviceMountPath):
 * `<kubelet>/plugins/kubernetes.io/flexvolume/<vendor>/<name>/mounts/<volume name>`, the global mount
 * expandvolume is given where the controller knows no staging of its own.
 */
export function flexDeviceMountPath(config: Config, volume: ExecVolume): string {
  return flexGlobalMountPath(config.kubeletDir, volume.driver, volume.id);
}

export const execBackend: Backend = {
  kind: EXEC_BACKEND,
  hasDevice: false,
  hasFilesystemType: true,
  // Who may use a volume at once is the catalog's access scope; a filesystem is all FlexVolume gives.
  nodeSharing: 'read-write',
  // The driver's expandfs runs on the node after expandvolume (expander.go), as kubelet calls it, if
  // the driver's init says requiresFSResize (expandsOnNodeFor).
  expandsOnNode: true,
  ownsData: false,
  makesFilesystem: false,
  sizeAlignment: 1,

  describe(spec) {
    if (spec.source !== undefined || (spec.mountOptions !== undefined && spec.mountOptions.length > 0))
      throw invalidArgument('source and mountOptions belong to static volumes; an exec volume passes its options to its driver');
    // Every later call runs this driver: a record without one could only fail them all.
    parseDriverName(spec.parameters?.driver, 'parameter driver');
    const fsType = spec.fsType ?? '';
    if (fsType !== '' && !/^[a-z0-9][a-z0-9._-]{0,31}$/.test(fsType)) throw invalidArgument(`fsType ${quoted(fsType)} is not a filesystem type name`);
    return { fsType };
  },

  async condition() {
    return { abnormal: false, message: 'exec volume: its storage is its FlexVolume driver\'s' };
  },

  // Registration only: FlexVolume has no provisioning, so there is nothing to make.
  async populate(_workDir, _volume, _ctx, from) {
    if (from) throw unimplemented('exec volumes cannot be made from a snapshot or another volume');
  },

  async snapshot() {
    throw unimplemented('exec volumes have no snapshots: their data is their driver\'s');
  },

  ...withoutDevice,

  async controllerAttach(volume, node, readonly, ctx) {
    const device = await portOf(ctx, volume).attach(execVolumeOfRecord(volume), node, readonly);
    const publishContext: Record<string, string> = {};
    if (device) publishContext[DEVICE_KEY] = device;
    return publishContext;
  },

  async controllerDetach(volume, node, ctx) {
    await portOf(ctx, volume).detach(execVolumeOfRecord(volume), node);
  },

  async isAttached(volume, node, ctx) {
    return portOf(ctx, volume).isAttached(execVolumeOfRecord(volume), node);
  },

  async stage(volume, staging, readonly, ctx, _mountFlags, publishContext) {
    const device = await portOf(ctx, volume).stage(execVolumeOfRecord(volume), staging.path, publishContext?.[DEVICE_KEY] ?? '', readonly);
    if (device !== undefined) await formatAndMount(ctx, volume, device, staging, readonly);
    return false;
  },

  unstage: (volume, path, ctx) => portOf(ctx, volume).unstage(execVolumeOfRecord(volume), path),
  publish: (volume, target, opts, ctx) => portOf(ctx, volume).publish(execVolumeOfRecord(volume), target, opts),
  unpublish: (volume, target, ctx) => portOf(ctx, volume).unpublish(execVolumeOfRecord(volume), target),

  // mounter.go: SetVolumeOwnership after the driver's mount unless its init says fsGroup: false.
  async appliesFsGroup(volume, ctx) {
    return (await portOf(ctx, volume).capabilities(execVolumeOfRecord(volume))).fsGroup;
  },

  // plugin.go NewMounter: MetricsStatFS of the pod's volume directory if the init says supportsMetrics
  // (default false), else MetricsNil, whose "not supported" kubelet's stats skip without a word.
  async withoutUsage(volume, ctx) {
    const exec = execVolumeOfRecord(volume);
    if ((await portOf(ctx, volume).capabilities(exec)).supportsMetrics) return undefined;
    return `its FlexVolume driver ${exec.driver.full} does not report metrics (its init leaves supportsMetrics false), and kubelet gives such a volume none`;
  },

  // `volume` is the record before the expansion: its size is the old size expandvolume is told. The
  // expand controller runs a FlexVolume driver's expandvolume whatever its init says (flexvolume
  // expander.go ExpandVolumeDevice; Not supported is expanderDefaults' success); requiresFSResize only
  // decides whether the node half follows (expandsOnNodeFor below).
  async expand(volume, newSize, ctx) {
    const exec = execVolumeOfRecord(volume);
    await portOf(ctx, volume).expandVolume(exec, flexDeviceMountPath(ctx.config, exec), newSize, volume.capacityBytes);
  },

  // plugin.go RequiresFSResize is the init's requiresFSResize (default true): without it the expand
  // controller marks the claim resized after expandvolume, and kubelet never runs expandfs.
  async expandsOnNodeFor(volume, ctx) {
    return (await portOf(ctx, volume).capabilities(execVolumeOfRecord(volume))).requiresFSResize;
  },

  async expandOnNode(volume, stagingPath, ctx) {
    const exec = execVolumeOfRecord(volume);
    const port = portOf(ctx, volume);
    const path = stagingPath ?? flexDeviceMountPath(ctx.config, exec);
    if (await port.expandFs(exec, path, volume.capacityBytes, volume.fsResizeFrom ?? volume.capacityBytes)) return;
    // expanderDefaults.NodeExpand: kubelet's generic resize (resize2fs, xfs_growfs) of the filesystem on
    // the device, which the driver's expandvolume grew. Without it the call answered done and the pod
    // kept the old size. A mount that is no block device's (a network share) has nothing to grow here.
    const staged = await stagedMount(path);
    if (staged && GROWABLE.has(staged.fsType)) await ctx.mounter.growFs(staged.device, path, staged.fsType);
  },
};
