import { backendFor } from '../backends/index.js';
import type { VolumeHealth } from '../backends/backend.js';
import type { BackendKind, VolumeRecord } from '../model.js';
import type { Core } from './core.js';

/**
 * What a front end may need to know of a backend to translate a request (CSI sizes a capacity range in
 * the backend's units, picks a filesystem type only where twinvol makes the filesystem), without
 * naming backends: adding one touches no adapter. The answers are the backend's own
 * (shared/backends/backend.ts).
 */
export interface BackendTraits {
  ownsData: boolean;
  makesFilesystem: boolean;
  sizeAlignment: number;
  /** The volume is a device on a node (a loop device over its image): a raw copy of it means something. */
  hasDevice: boolean;
  /** A filesystem type is part of the volume (a dir volume's is not: it is a bind-mounted directory). */
  hasFilesystemType: boolean;
}

export function backendTraits(kind: BackendKind): BackendTraits {
  const { ownsData, makesFilesystem, sizeAlignment, hasDevice, hasFilesystemType } = backendFor(kind);
  return { ownsData, makesFilesystem, sizeAlignment, hasDevice, hasFilesystemType };
}

/** The controller's view of a volume's health, from its backend: is its data where the catalog says? */
export function volumeCondition(core: Core, volume: VolumeRecord): Promise<VolumeHealth> {
  return backendFor(volume.backend).condition(volume, core);
}

export type { VolumeHealth };
