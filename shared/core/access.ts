import { backendFor } from '../backends/index.js';
import { invalidArgument } from '../errors.js';
import type { AccessRequest, AccessScope, BackendKind } from '../model.js';

export type { AccessRequest } from '../model.js';

/** What decides whether an access request fits a volume: its record, or the record a create asks for. */
export interface VolumeShape {
  id: string;
  backend: BackendKind;
  fsType: string;
  access: AccessScope;
}

/** The request FlexVolume and the admin CLI make: a filesystem, written, by one node or several. */
export const filesystemAccess = (scope: AccessScope): AccessRequest => ({
  scope,
  raw: false,
  readerOnly: false,
  singleWriter: false,
  fsType: '',
});

/**
 * Requests as a set, in one order: what a volume record keeps, so that the same requests in another
 * order, or repeated, compare equal (CSI lists capabilities in no particular order).
 */
export function accessSet(requests: readonly AccessRequest[]): AccessRequest[] {
  const key = (r: AccessRequest) => JSON.stringify([r.scope, r.raw, r.readerOnly, r.singleWriter, r.fsType]);
  const byKey = new Map(requests.map((r) => [key(r), { scope: r.scope, raw: r.raw, readerOnly: r.readerOnly, singleWriter: r.singleWriter, fsType: r.fsType }]));
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
}

/**
 * The one rule of access mode against backend, for every front end (create, publish, validate): why
 * `request` does not fit the volume, or undefined when it does. What storage can be shared and how is
 * the backend's to say (see shared/backends/backend.ts, `nodeSharing`).
 */
export function accessMismatch(volume: VolumeShape, request: AccessRequest): string | undefined {
  const backend = backendFor(volume.backend);
  if (request.raw && !backend.hasDevice) return `a ${volume.backend} volume has no block device; use mount access`;
  if (request.scope === 'multi-node' && backend.nodeSharing === 'raw-read-only') {
    if (!request.raw) return `a ${volume.backend} volume holds a filesystem that one node at a time can mount; use single-node access`;
    if (!request.readerOnly) return `a ${volume.backend} volume can be shared between nodes read-only only; several nodes writing one device corrupts it`;
  }
  if (request.scope === 'multi-node' && volume.access === 'single-node') return `volume ${volume.id} was created for single-node access`;
  if (!request.raw && request.fsType && backend.hasFilesystemType && request.fsType !== volume.fsType)
    return `volume ${volume.id} holds ${volume.fsType || 'no filesystem type'}, not ${request.fsType}`;
  return undefined;
}

/** InvalidArgument when the request does not fit: it asks for something this volume cannot be. */
export function requireAccess(volume: VolumeShape, request: AccessRequest): void {
  const why = accessMismatch(volume, request);
  if (why) throw invalidArgument(why);
}

/** The scope a volume made for these uses needs: multi-node when any use is. */
export function scopeOfUses(requests: readonly AccessRequest[]): AccessScope {
  return requests.some((r) => r.scope === 'multi-node') ? 'multi-node' : 'single-node';
}

/**
 * The filesystem type a new volume is made with where twinvol makes it: the class's (a StorageClass's
 * fsType), else the one its filesystem uses name (a CSI mount capability's fs_type); the backend
 * applies its default to none. Two types at once is InvalidArgument.
 */
export function fsTypeOfUses(classFsType: string | undefined, requests: readonly AccessRequest[]): string | undefined {
  const named = new Set(requests.filter((r) => !r.raw && r.fsType).map((r) => r.fsType));
  if (classFsType) named.add(classFsType);
  if (named.size > 1) throw invalidArgument(`conflicting filesystem types requested: ${[...named].join(', ')}`);
  return [...named][0];
}
