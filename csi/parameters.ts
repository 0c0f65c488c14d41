import { execVolumeContext, invalidArgument, validateStringMap, type VolumeRecord } from '../shared/index.js';
import type { StringMap } from './csi-types.js';

/**
 * Keys the external-provisioner and kubelet add themselves (PVC name, secret references, pod info,
 * the ephemeral marker). They say nothing about the volume, so they are neither stored nor compared.
 */
export const CO_PREFIX = 'csi.storage.k8s.io/';

export function withoutCoKeys(map: StringMap): StringMap {
  return Object.fromEntries(Object.entries(map).filter(([k]) => !k.startsWith(CO_PREFIX)));
}

/**
 * A map of plugin keys, CO keys removed, every other key one of `known`: a StorageClass typo is a
 * clear INVALID_ARGUMENT rather than a silent default.
 */
export function pluginKeys(map: StringMap, what: string, known: readonly string[]): StringMap {
  const own = withoutCoKeys(validateStringMap(map, what));
  for (const key of Object.keys(own))
    if (!known.includes(key)) throw invalidArgument(`${what}: unknown key ${JSON.stringify(key.slice(0, 64))} (twinvol reads ${known.join(', ') || 'none'})`);
  return own;
}

/** StorageClass parameters of CreateVolume. */
export const CREATE_KEYS = ['backend', 'fsType', 'source', 'mountOptions'] as const;

/** What CreateVolume hands back, and what a later NodeStage may see again unchanged. */
export function volumeContextOf(volume: VolumeRecord): StringMap {
  // An exec volume's context is its PV's flexVolume fields (driver, options), as a static PV gives them.
  const exec = execVolumeContext(volume);
  if (exec) return exec;
  return { backend: volume.backend, ...(volume.fsType ? { fsType: volume.fsType } : {}) };
}
