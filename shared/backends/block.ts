import { type Stats, statSync } from 'node:fs';
import { close, fsync, ftruncate, open, truncate } from '../fs-async.js';
import { join } from 'node:path';
import { failedPrecondition, internal } from '../errors.js';
import { findLoopDevice, findLoopDevices, isReadOnly, needsDetach } from '../loop-devices.js';
import { readMounts } from '../mountinfo.js';
import type { VolumeRecord } from '../model.js';
import { formatSize } from '../size.js';
import { validateBlockFsType } from '../validate.js';
import { type Backend, type BackendContext, describeOwned, formatBlank } from './backend.js';

/**
 * A sparse image file attached as a loop device, as a cloud disk appears under /dev. The filesystem is
 * made on the image file when the volume is created (mkfs works on a file), and the record says which
 * (`madeFilesystem`), so a stage binds a loop device for its mount alone and mounts it (shared/mounter.ts
 * mountImage: two system calls, or one `mount -o loop`). A volume made before that, a copy, or one
 * created for raw block access only is probed with blkid at stage and formatted there only when blank:
 * an image that holds a filesystem or a partition table is never formatted.
 */
export const blockBackend: Backend = {
  kind: 'block',
  hasDevice: true,
  hasFilesystemType: true,
  // One image, one writer: a filesystem mounted by two kernels at once is corrupted by both.
  nodeSharing: 'raw-read-only',
  expandsOnNode: true,
  ownsData: true,
  makesFilesystem: true,
  // losetup and the filesystems work in whole sectors; a MiB keeps every size a whole number of them.
  sizeAlignment: 2 ** 20,

  describe(spec, config) {
    describeOwned('block', spec);
    return { fsType: validateBlockFsType(spec.fsType, config.defaultFsType) };
  },

  // One synchronous stat (a few microseconds), as the dir backend's: ListVolumes asks this of every
  // volume it lists, in batches, and a stat through libuv's threadpool cost several times that.
  async condition(volume, ctx) {
    let st: Stats | undefined;
    try {
      st = statSync(ctx.catalog.imagePath(volume.id), { throwIfNoEntry: false });
    } catch {
      st = undefined;
    }
    if (!st) return { abnormal: true, message: `the backing image of volume ${volume.id} is missing` };
    if (st.size < volume.capacityBytes) return { abnormal: true, message: `the image of volume ${volume.id} is smaller (${st.size} bytes) than its capacity` };
    return { abnormal: false, message: 'volume is healthy' };
  },

  async populate(workDir, volume, ctx, from) {
    const image = join(workDir, 'image.img');
    if (from) {
      ctx.progress?.(`copying ${formatSize(from.sizeBytes)} from ${from.dir}`);
      await ctx.mounter.copySparse(join(from.dir, 'image.img'), image);
      if (volume.capacityBytes > from.sizeBytes) await truncate(image, volume.capacityBytes);
      return;
    }
    ctx.progress?.(`making a ${formatSize(volume.capacityBytes)} image`);
    const fd = await open(image, 'wx', 0o600);
    try {
      await ftruncate(fd, volume.capacityBytes);
      await fsync(fd);
    } finally {
      await close(fd);
    }
    // A volume asked for only as a raw device gets the zeroes it expects, not a filesystem.
    if (volume.accessRequests?.length && volume.accessRequests.every((r) => r.raw)) return;
    // Made here, in the work directory (shared/store/catalog.ts createEntry): a create killed mid-mkfs
    // leaves only work that the next create or delete of this volume sweeps. The record, written after
    // populate, keeps what was made.
    const fsType = validateBlockFsType(volume.fsType, ctx.config.defaultFsType);
    ctx.progress?.(`formatting ${fsType} on ${formatSize(volume.capacityBytes)}`);
    await ctx.mounter.format(image, fsType, true);
    volume.madeFilesystem = fsType;
  },

  async snapshot(volume, workDir, ctx) {
    await ctx.mounter.copySparse(ctx.catalog.imagePath(volume.id), join(workDir, 'image.img'));
  },

  async nodeAttach(volume, ctx) {
    const image = ctx.catalog.imagePath(volume.id);
    const found = findLoopDevice(image);
    if (found) return found;
    const device = await ctx.mounter.loopAttach(image);
    // losetup binds an image it cannot open for writing read-only, with a warning only. Such a device
    // is no stage's (a writable one is looked for), and each retry would bind another.
    if (isReadOnly(device)) {
      await ctx.mounter.loopDetach(device);
      throw failedPrecondition(`the image of volume ${volume.id} cannot be opened for writing (is the data root read-only?): not staging it`);
    }
    return device;
  },

  attachedDevice(volume, ctx) {
    return findLoopDevice(ctx.catalog.imagePath(volume.id));
  },

  // One per node for every read-only publish of the volume, bound at the first and kept until the
  // staging's device goes (nodeDetach): an unpublish then has no device of its own to release, and a
  // call cut short anywhere leaves nothing that the unstage does not take.
  async readOnlyDevice(volume, ctx) {
    const image = ctx.catalog.imagePath(volume.id);
    const found = findLoopDevice(image, true);
    if (found) return found;
    const device = await ctx.mounter.loopAttach(image, { readOnly: true });
    if (!isReadOnly(device)) {
      await ctx.mounter.loopDetach(device);
      throw internal(`${device} was bound to the image of volume ${volume.id} read-only, and the kernel says it takes writes: not publishing it`);
    }
    return device;
  },

  boundDevices(volume, ctx) {
    return findLoopDevices(ctx.catalog.imagePath(volume.id));
  },

  async nodeDetach(volume, ctx) {
    for (const device of this.boundDevices(volume, ctx)) if (needsDetach(device)) await ctx.mounter.loopDetach(device);
  },

  async stage(volume, staging, readonly, ctx, mountFlags = []) {
    const image = ctx.catalog.imagePath(volume.id);
    const fsType = validateBlockFsType(volume.fsType, ctx.config.defaultFsType);
    const options = [...(readonly ? ['ro'] : []), ...mountFlags];
    // XFS refuses to mount two copies with one UUID (a snapshot restored beside its origin) without nouuid.
    if (fsType === 'xfs') options.push('nouuid');
    // The catalog knows what create made: asked for as another type, refused before a device is set up.
    if (volume.madeFilesystem !== undefined && volume.madeFilesystem !== fsType) throw otherFilesystem(volume, volume.madeFilesystem, fsType);
    // The usual stage: the filesystem create made, nothing to grow, no device yet: a device bound for
    // this mount alone (shared/mounter.ts mountImage). Read-only is left to loopAttach: mount -o loop,
    // the way without the addon, would bind a read-only device, which a later read-write stage could
    // not mount.
    if (volume.madeFilesystem !== undefined && !volume.fsResizePending && !options.includes('ro') && findLoopDevice(image) === undefined) {
      const mounted = await mountChecked(volume, fsType, ctx, image, () => ctx.mounter.mountImage(image, staging, { fsType, options }));
      if (mounted) return true;
    }
    const device = await this.nodeAttach(volume, ctx);
    // Where the catalog knows what create made, no blkid (about 5 ms a spawn) on the way to the mount.
    const probed: { fsType?: string; partitionTable?: string } = volume.madeFilesystem ? { fsType: volume.madeFilesystem } : await ctx.mounter.probe(device);
    const found = probed.fsType;
    if (found === undefined) {
      await formatBlank(ctx, volume, device, fsType, readonly, probed);
    } else if (found !== fsType) {
      throw otherFilesystem(volume, found, fsType);
    }
    let grown = found === undefined || !volume.fsResizePending;
    if (!grown && !readonly) {
      await ctx.mounter.loopRefresh(device);
      // Offline growth only while no other mount of the device exists (e2fsck on a mounted fs is refused).
      if (fsType === 'ext4' && !readMounts().some((m) => m.source === device)) {
        await ctx.mounter.growExt4Offline(device);
        grown = true;
      }
    }
    await mountChecked(volume, fsType, ctx, device, () => ctx.mounter.mount(device, staging, { fsType, options }));
    // XFS only grows mounted.
    if (!grown && !readonly && fsType === 'xfs') {
      await ctx.mounter.growFs(device, staging.path, fsType);
      grown = true;
    }
    return grown;
  },

  async expand(volume, newSize, ctx) {
    await truncate(ctx.catalog.imagePath(volume.id), newSize);
  },

  async expandOnNode(volume, stagingPath, ctx) {
    const image = ctx.catalog.imagePath(volume.id);
    const device = findLoopDevice(image);
    if (!device) throw failedPrecondition(`volume ${volume.id} is not attached on this node`);
    // Every device of the image sees the new size: the stage's, and a read-only publishes' one.
    for (const each of findLoopDevices(image)) await ctx.mounter.loopRefresh(each);
    if (stagingPath !== undefined) await ctx.mounter.growFs(device, stagingPath, volume.fsType);
  },
};

/**
 * Runs a mount of the volume's filesystem from `source` (its device, or its image). When the mount
 * fails and the catalog says what create made, something other than twinvol may have written another
 * filesystem over the image: said as blkid would have said it before the mount (blkid reads an image
 * file as well as a device), rather than as mount(8)'s "wrong fs type".
 */
async function mountChecked<T>(volume: VolumeRecord, fsType: string, ctx: BackendContext, source: string, mount: () => Promise<T>): Promise<T> {
  try {
    return await mount();
  } catch (err) {
    const actual = volume.madeFilesystem ? (await ctx.mounter.probe(source).catch(() => undefined))?.fsType : undefined;
    if (actual !== undefined && actual !== fsType) throw otherFilesystem(volume, actual, fsType);
    throw err;
  }
}

const otherFilesystem = (volume: VolumeRecord, actual: string, fsType: string) =>
  failedPrecondition(`volume ${volume.id} holds a ${actual} filesystem, not ${fsType}; refusing to mount or reformat it`);
