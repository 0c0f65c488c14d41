import type { VolumeRecord } from '../model.js';
import { validateVolumeId, type VolumeId } from '../validate.js';
import type { Core } from './core.js';
import { mountsOf } from './publishing.js';
import { deleteVolume } from './volumes.js';

/**
 * The parameter twinvol's own CSI inline volumes (dir, block) carry, from before the record had a
 * lifetime (schema 6). It also keeps such a volume apart from a provisioned one of the same id:
 * their parameters differ, so one is never taken for the other (csi/ephemeral.ts `ephemeralSpec`).
 */
export const INLINE_PARAMETER = 'ephemeral';

/**
 * A volume that lives as long as its pod: the lifetime mark, or the parameter on a schema-6 record. An
 * exec inline volume has the mark alone, since its parameters are its driver's options
 * (shared/backends/exec.ts).
 */
export function livesWithPod(volume: VolumeRecord): boolean {
  return volume.lifetime === 'pod' || volume.parameters[INLINE_PARAMETER] === 'true';
}

/**
 * Deletes a pod-lifetime volume once nothing on this node mounts it: after its last unpublish, and
 * after a publish that failed with nothing mounted, since kubelet unpublishes only what it saw
 * published. Any other volume is left alone (false). Decided under the volume's node lock, which
 * every publish holds while it mounts (shared/core/publishing.ts), then deleted under the catalog
 * lock (the node-then-catalog order of docs/architecture.md): a publish of the same volume racing it
 * either mounted first, and the volume stays, or comes after and finds no volume.
 */
export async function endInlineIfUnmounted(core: Core, id: VolumeId): Promise<boolean> {
  validateVolumeId(id);
  // A lifetime is set at create and never changes: any other volume (every NodeUnpublishVolume of a
  // PV comes here) is let go without the lock (test/perf/counts.test.ts counts it).
  const seen = await core.catalog.getVolume(id);
  if (!seen || !livesWithPod(seen)) return false;
  return core.nodeState.lockVolume(id, async () => {
    const volume = await core.catalog.getVolume(id);
    if (!volume || !livesWithPod(volume) || (await mountsOf(core, id)).length) return false;
    return deleteVolume(core, id);
  });
}

/**
 * Runs what publishes a pod-lifetime volume just made or registered (`publishing`: the checks after
 * the registration, then the publish): if any of it fails, the volume goes again unless a mount was
 * left (endInlineIfUnmounted), since kubelet unpublishes only what it saw published. The failure is
 * the answer; a failure to end the volume is not.
 */
export async function publishingInline<T>(core: Core, id: VolumeId, publishing: () => Promise<T>): Promise<T> {
  try {
    return await publishing();
  } catch (err) {
    await endInlineIfUnmounted(core, id).catch(() => undefined);
    throw err;
  }
}
