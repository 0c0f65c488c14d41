import { existsSync } from 'node:fs';
import { chmod, mkdir } from '../fs-async.js';
import { join } from 'node:path';
import { type Backend, describeOwned, withoutDevice } from './backend.js';

/** A directory under the data root, bind-mounted into place. Capacity is advisory. */
export const dirBackend: Backend = {
  kind: 'dir',
  hasDevice: false,
  hasFilesystemType: false,
  nodeSharing: 'read-write',
  expandsOnNode: false,
  ownsData: true,
  makesFilesystem: false,
  sizeAlignment: 1,

  // A requested fs type says nothing about a directory (provisioners often default one): not kept.
  describe(spec) {
    describeOwned('dir', spec);
    return { fsType: '' };
  },

  // ListVolumes asks this of every volume it lists, in batches: one synchronous access(2) of
  // "<data>/." (a few microseconds; it fails unless data is a directory, or a link to one, as stat's
  // isDirectory() would), where a stat through libuv's threadpool cost several times that and a
  // Stats object with four Dates for the collector.
  async condition(volume, ctx) {
    if (!existsSync(`${ctx.catalog.dataDir(volume.id)}/.`)) return { abnormal: true, message: `the backing directory of volume ${volume.id} is missing` };
    return { abnormal: false, message: 'volume is healthy' };
  },

  async populate(workDir, _volume, ctx, from) {
    const data = join(workDir, 'data');
    await mkdir(data);
    // Pods run as arbitrary users; like hostPath volumes the root is world-writable and fsGroup narrows it.
    await chmod(data, 0o777);
    if (from) {
      ctx.progress?.(`copying ${from.dir}`);
      await ctx.mounter.copyTree(join(from.dir, 'data'), data);
    }
  },

  async snapshot(volume, workDir, ctx) {
    const data = join(workDir, 'data');
    await mkdir(data);
    await ctx.mounter.copyTree(ctx.catalog.dataDir(volume.id), data);
  },

  ...withoutDevice,

  // A directory has no filesystem for a staging to mount once for all pods: a staging is its record
  // alone, and each publish binds this directory itself, unless the caller needs a mount point there
  // (StageOptions.mountPoint, shared/core/staging.ts), which `stage` binds.
  stagedDirectory: (volume, ctx) => ctx.catalog.dataDir(volume.id),

  async stage(volume, staging, readonly, ctx, mountFlags) {
    await ctx.mounter.bind(ctx.catalog.dataDir(volume.id), staging, readonly, mountFlags);
    return true;
  },

  // A pod's mount with no staging to bind from (a non-attachable FlexVolume `mount`, a CSI publish
  // without a stage step, or from a staging that is its record alone) binds the data directory
  // straight onto the target. A directory has no filesystem for a staging to mount once for all pods,
  // so an implicit staging bought nothing but a second mount(8) on the way in and a second umount(8)
  // on the way out. A mounted staging (FlexVolume mountdevice's) is bound from, as for any backend.
  async publish(volume, target, opts, ctx) {
    if (opts.stagingPath) return false;
    await ctx.mounter.bind(ctx.catalog.dataDir(volume.id), { path: target, within: ctx.config.kubeletDir }, opts.readonly, opts.bindFlags);
    return true;
  },

  async expand() {},
  async expandOnNode() {},
};
