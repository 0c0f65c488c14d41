import { statfs } from '../fs-async.js';
import { backendFor } from '../backends/index.js';
import { growsOnNode } from '../backends/backend.js';
import { errnoCode, failedPrecondition, invalidArgument, notFound, unimplemented } from '../errors.js';
import type { MountRecord, VolumeRecord } from '../model.js';
import { isMountPoint } from '../mountinfo.js';
import { validateVolumeId, type VolumeId } from '../validate.js';
import type { Core } from './core.js';
import { isStaleError } from './mount-target.js';

export interface VolumeStats {
  totalBytes: number;
  availableBytes: number;
  usedBytes: number;
  totalInodes: number;
  freeInodes: number;
  usedInodes: number;
  /** Abnormal when twinvol's record says mounted and the kernel disagrees. */
  abnormal: boolean;
  message: string;
}

/** Usage of a volume where it is staged or published on this node. */
export async function volumeStats(core: Core, id: VolumeId, volumePath: string): Promise<VolumeStats> {
  validateVolumeId(id);
  const volume = await core.catalog.getVolume(id);
  if (!volume) throw notFound(`volume ${id} does not exist`);
  const record = recordAt(await core.nodeState.listForVolume(id), id, volumePath);
  // Unimplemented, not zeros: a CO reads a usage of zeros as a volume of no size, and kubelet, as for a
  // volume whose metrics are not supported, then reports none for it.
  const unreported = await backendFor(volume.backend).withoutUsage?.(volume, core);
  if (unreported !== undefined) throw unimplemented(`volume ${id} has no usage to report: ${unreported}`);
  // A staging that is its record alone (a dir volume's) is measured at the directory its pods bind:
  // nothing is mounted at its path, so the mount table is not read for it.
  const stagedDirectory = record.recordOnly ? backendFor(volume.backend).stagedDirectory?.(volume, core) : undefined;
  const path = stagedDirectory ?? record.path;
  // A raw block staging mounts nothing: it is its loop device alone, which was reported abnormal here.
  const mountsSomething = !stagedDirectory && !(record.block && record.kind === 'stage');
  if (mountsSomething && !isMountPoint(path)) return { ...ZERO, abnormal: true, message: `${path} is recorded as mounted but the kernel has no mount there` };
  if (record.block) {
    if (!backendFor(volume.backend).attachedDevice(volume, core)) return { ...ZERO, abnormal: true, message: `volume ${id} has no device on this node` };
    return { ...ZERO, totalBytes: volume.capacityBytes, abnormal: false, message: 'raw block device' };
  }
  let st: Awaited<ReturnType<typeof statfs>>;
  try {
    st = await statfs(path);
  } catch (err) {
    // A dead mount is a condition to report (VOLUME_CONDITION), not a failure of the call.
    if (isStaleError(err)) return { ...ZERO, abnormal: true, message: `${path} is mounted but does not answer (${errnoCode(err)})` };
    if (stagedDirectory && errnoCode(err) === 'ENOENT') return { ...ZERO, abnormal: true, message: `${path}, which volume ${id} is staged from, is missing` };
    throw err;
  }
  const totalBytes = st.blocks * st.bsize;
  const availableBytes = st.bavail * st.bsize;
  return {
    totalBytes,
    availableBytes,
    usedBytes: totalBytes - st.bfree * st.bsize,
    totalInodes: st.files,
    freeInodes: st.ffree,
    usedInodes: st.files - st.ffree,
    abnormal: false,
    message: 'volume is healthy',
  };
}

/**
 * The volume's own mount record at `volumePath`. The path is only a key here: whatever it is (relative,
 * missing, another volume's), it names nothing of this volume unless a record of this volume holds it,
 * and then it was checked when the mount was made. So a wrong path is NotFound, as CSI asks.
 */
function recordAt(records: readonly MountRecord[], id: string, volumePath: string): MountRecord {
  if (!volumePath) throw invalidArgument('volume path is required');
  // Records keep paths as validatePathUnder trims them (shared/validate.ts): ".../mount/" names the same mount.
  const key = volumePath.length > 1 ? volumePath.replace(/\/+$/, '') : volumePath;
  const record = records.find((r) => r.path === key);
  if (!record) throw notFound(`volume ${id} is not staged or published at ${volumePath.slice(0, 256)}`);
  return record;
}

const ZERO = { totalBytes: 0, availableBytes: 0, usedBytes: 0, totalInodes: 0, freeInodes: 0, usedInodes: 0 };

/**
 * Grows the filesystem of a volume staged on this node to its (already grown) backing size; online,
 * as resize2fs and xfs_growfs allow. A volume that needs nothing answers its size. `required` (CSI's
 * capacity_range, FlexVolume's newSize) above that size is refused before anything grows: the backing
 * storage is the controller's to grow first, and answering the old size would read as done.
 */
export async function expandOnNode(core: Core, id: VolumeId, volumePath?: string, required = 0): Promise<VolumeRecord> {
  validateVolumeId(id);
  return core.nodeState.lockVolume(id, async () => {
    const volume = await core.catalog.requireVolume(id);
    if (required > volume.capacityBytes)
      throw failedPrecondition(`volume ${id} is ${volume.capacityBytes} bytes, not the ${required} asked for: its controller expansion grows it first`);
    // CSI names where the volume is (FlexVolume expandfs's paths are kubelet's, and checked by nothing here).
    const records = await core.nodeState.listForVolume(id);
    if (volumePath !== undefined) recordAt(records, id, volumePath);
    const backend = backendFor(volume.backend);
    if (!(await growsOnNode(backend, volume, core))) return volume;
    const staged = records.find((r) => r.kind === 'stage' && !r.block && isMountPoint(r.path));
    if (!staged) {
      // Raw block use: only the device grows; the pod owns whatever is on it.
      if (!backend.attachedDevice(volume, core)) throw failedPrecondition(`volume ${id} is not staged on this node`);
      await backend.expandOnNode(volume, undefined, core);
      return volume;
    }
    await backend.expandOnNode(volume, staged.path, core);
    return core.catalog.updateVolume(id, (v) => ({ ...v, fsResizePending: undefined, fsResizeFrom: undefined }));
  });
}
