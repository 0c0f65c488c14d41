import { failedPrecondition, invalidArgument, unimplemented } from '../errors.js';
import { heldToReading } from '../mount-options.js';
import { requireSourceAllowed, resolveSource } from '../static-source.js';
import { validateMountOptions, validateStaticFsType, validateStaticSource } from '../validate.js';
import { type Backend, withoutDevice } from './backend.js';

/** Mounts a source that already exists (tmpfs, an image file, an NFS export) with the given type and options. */
export const staticBackend: Backend = {
  kind: 'static',
  hasDevice: false,
  hasFilesystemType: true,
  nodeSharing: 'read-write',
  expandsOnNode: false,
  ownsData: false,
  makesFilesystem: false,
  sizeAlignment: 1,

  describe(spec, config) {
    const source = validateStaticSource(spec.source);
    requireSourceAllowed(config, source, spec.createdBy);
    return { fsType: validateStaticFsType(spec.fsType), source, mountOptions: validateMountOptions(spec.mountOptions) };
  },

  async condition() {
    return { abnormal: false, message: 'static volume: its source is not watched by twinvol' };
  },

  async populate(_workDir, _volume, _ctx, from) {
    if (from) throw unimplemented('static volumes cannot be made from a snapshot or another volume');
  },

  async snapshot() {
    throw unimplemented('static volumes have no snapshots: twinvol does not own their data');
  },

  ...withoutDevice,

  async stage(volume, staging, readonly, ctx, mountFlags = []) {
    if (!volume.source) throw failedPrecondition(`static volume ${volume.id} has no source`);
    // The volume's own options are held to reading too: an rw after their ro undid it.
    const options = heldToReading(readonly, [...(volume.mountOptions ?? []), ...mountFlags]);
    if (readonly && !options.includes('ro')) options.push('ro');
    const source = await resolveSource(ctx.config, volume.source, volume.createdBy);
    await ctx.mounter.mount(source, staging, { fsType: volume.fsType, options });
    return true;
  },

  async expand(volume) {
    throw invalidArgument(`volume ${volume.id} is static: twinvol does not own its size`);
  },
  async expandOnNode() {},
};
