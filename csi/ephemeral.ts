import { backendTraits, type Core, type CreateVolumeSpec, deleteVolume, invalidArgument, mountsOf, parseBoolean, parseSize, validateBackend, type VolumeId, type VolumeRecord } from '../shared/index.js';
import { DEFAULT_SIZE_BYTES, sizeFromRange } from './capacity.js';
import type { StringMap } from './csi-types.js';
import { pluginKeys } from './parameters.js';

/** kubelet's marker on NodePublish of a CSI inline (pod-lifetime) volume. */
export const EPHEMERAL_CONTEXT_KEY = 'csi.storage.k8s.io/ephemeral';
/**
 * Stored in the parameters of twinvol's own inline volumes (dir, block), which also carry the record's
 * lifetime mark: it keeps them apart from a provisioned volume of the same id (see `ephemeralSpec`).
 */
const EPHEMERAL_PARAMETER = 'ephemeral';

export function isEphemeralRequest(context: StringMap): boolean {
  return parseBoolean(context[EPHEMERAL_CONTEXT_KEY], EPHEMERAL_CONTEXT_KEY, false);
}

/**
 * The volume lives as long as its pod: deleted by NodeUnpublish with its last mount. Records written
 * before the lifetime mark (schema 6) have the parameter alone; an exec inline volume has the mark
 * alone, since its parameters are its driver's options (shared/backends/exec.ts).
 */
export function isEphemeralVolume(volume: VolumeRecord): boolean {
  return volume.lifetime === 'pod' || volume.parameters[EPHEMERAL_PARAMETER] === 'true';
}

/**
 * An inline volume is deleted once nothing mounts it: after its last unpublish, and after a publish
 * that failed with nothing mounted, since kubelet unpublishes only what it saw published and the pod
 * may be gone before a retry. Any other volume is left alone.
 */
export async function endIfUnmountedInline(core: Core, id: VolumeId): Promise<void> {
  const volume = await core.catalog.getVolume(id);
  if (volume && isEphemeralVolume(volume) && !(await mountsOf(core, id)).length) await deleteVolume(core, id);
}

/**
 * The volume an inline volume stands for, from the pod spec's volumeAttributes: `backend` (dir by
 * default, or block), `size` (e.g. "1Gi"; 10 GiB sparse by default) and `fsType` for block. The id is
 * kubelet's volume_id itself ("csi-<hash>"), which is already unique per pod and volume. The marker
 * parameter also keeps such a volume apart from a provisioned one of the same id: their parameters
 * differ, so one can never be taken (or deleted) for the other.
 */
export function ephemeralSpec(id: string, context: StringMap): CreateVolumeSpec {
  const attrs = pluginKeys(context, 'volume_context', ['backend', 'size', 'fsType']);
  const backend = validateBackend(attrs.backend ?? 'dir');
  const traits = backendTraits(backend);
  // A volume whose data twinvol does not own (static) would let a pod spec choose what the node mounts.
  if (!traits.ownsData) throw invalidArgument(`an inline volume cannot be a ${backend} volume: its data would come from the pod spec`);
  const requested = attrs.size === undefined ? 0 : parseSize(attrs.size, 'volume_context size');
  const capacityBytes = sizeFromRange({ required_bytes: String(requested), limit_bytes: '0' }, DEFAULT_SIZE_BYTES, traits.sizeAlignment);
  return {
    id,
    backend,
    capacityBytes,
    fsType: attrs.fsType,
    access: 'single-node',
    parameters: { ...attrs, [EPHEMERAL_PARAMETER]: 'true' },
    lifetime: 'pod',
    createdBy: 'csi',
  };
}
