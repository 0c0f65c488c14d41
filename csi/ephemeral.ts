import { backendTraits, type CreateVolumeSpec, INLINE_PARAMETER, invalidArgument, parseBoolean, parseWrittenSize, validateBackend } from '../shared/index.js';
import { DEFAULT_SIZE_BYTES, sizeFromRange } from './capacity.js';
import type { StringMap } from './csi-types.js';
import { pluginKeys } from './parameters.js';

/** kubelet's marker on NodePublish of a CSI inline (pod-lifetime) volume. */
export const EPHEMERAL_CONTEXT_KEY = 'csi.storage.k8s.io/ephemeral';

export function isEphemeralRequest(context: StringMap): boolean {
  return parseBoolean(context[EPHEMERAL_CONTEXT_KEY], EPHEMERAL_CONTEXT_KEY, false);
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
  const requested = attrs.size === undefined ? 0 : parseWrittenSize(attrs.size, 'volume_context size');
  const capacityBytes = sizeFromRange({ required_bytes: String(requested), limit_bytes: '0' }, DEFAULT_SIZE_BYTES, traits.sizeAlignment);
  return {
    id,
    backend,
    capacityBytes,
    fsType: attrs.fsType,
    access: 'single-node',
    parameters: { ...attrs, [INLINE_PARAMETER]: 'true' },
    lifetime: 'pod',
    createdBy: 'csi',
  };
}
