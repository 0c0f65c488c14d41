import { backendFor } from '../backends/index.js';
import { alreadyExists, failedPrecondition, invalidArgument, notFound } from '../errors.js';
import type { SnapshotRecord, VolumeRecord } from '../model.js';
import { SCHEMA_VERSION } from '../store/json-record.js';
import { requireSameName, snapshotIdForName } from '../names.js';
import { type GroupSnapshotId, isValidId, type SnapshotId, validateSnapshotId, validateVolumeId, type VolumeId } from '../validate.js';
import { type Core, now } from './core.js';

export interface CreateSnapshotResult {
  snapshot: SnapshotRecord;
  created: boolean;
}

/**
 * Copies a volume's data into a snapshot named `name`; its id is the name's (`idForName`,
 * shared/names.ts), and the record keeps a name that differs from it. Repeating the call with the
 * same source answers the existing snapshot; the same name for another source is AlreadyExists.
 * Snapshots are full (sparse, reflinked where possible) copies, so a volume never depends on them.
 * Data a node still holds in its page cache is not in the copy: the copy is crash-consistent.
 */
export async function createSnapshot(core: Core, name: string, sourceVolumeId: VolumeId): Promise<CreateSnapshotResult> {
  const id = snapshotIdForName(name, 'snapshot name');
  validateVolumeId(sourceVolumeId, 'source volume id');
  return core.catalog.lock('snapshot', id, async () => {
    const existing = await core.catalog.getSnapshot(id);
    if (existing) {
      requireSameName('snapshot', existing, name);
      if (existing.sourceVolumeId !== sourceVolumeId)
        throw alreadyExists(`snapshot ${id} already exists with source volume ${existing.sourceVolumeId}`);
      return { snapshot: existing, created: false };
    }
    // Held while copying, so the source cannot be deleted or grown halfway through the copy.
    return core.catalog.lock('volume', sourceVolumeId, async () => {
      const volume = await core.catalog.requireVolume(sourceVolumeId);
      requireSnapshotable(volume);
      return { snapshot: await cutSnapshot(core, volume, id, { name, createdAt: now() }), created: true };
    });
  });
}

/** A snapshot copies data twinvol owns; a static volume's data is someone else's. */
export function requireSnapshotable(volume: VolumeRecord): void {
  if (!backendFor(volume.backend).ownsData) throw invalidArgument(`volume ${volume.id} is ${volume.backend}: twinvol does not own its data and cannot snapshot it`);
}

/**
 * Copies a volume (whose lock the caller holds) into a new snapshot entry: built in the work area,
 * its record written last, renamed into place (shared/store/catalog.ts createEntry). A name equal to
 * the id is not kept.
 */
export async function cutSnapshot(core: Core, volume: VolumeRecord, id: SnapshotId, fields: { name: string; createdAt: string; groupId?: GroupSnapshotId }): Promise<SnapshotRecord> {
  const snapshot: SnapshotRecord = {
    schema: SCHEMA_VERSION,
    id,
    ...(fields.name !== id ? { name: fields.name } : {}),
    sourceVolumeId: volume.id,
    ...(fields.groupId ? { groupId: fields.groupId } : {}),
    backend: volume.backend,
    fsType: volume.fsType,
    sizeBytes: volume.capacityBytes,
    createdAt: fields.createdAt,
  };
  await core.catalog.createEntry('snapshots', snapshot, (workDir) => backendFor(volume.backend).snapshot(volume, workDir, core));
  return snapshot;
}

/**
 * A snapshot cut with a group is the group's: deleting it alone would leave the group short. Members
 * of a group whose record was never written (an attempt a crash cut short) are anyone's to delete.
 */
async function requireNotInGroup(core: Core, snapshot: SnapshotRecord): Promise<void> {
  if (snapshot.groupId && (await core.catalog.getGroup(snapshot.groupId)))
    throw failedPrecondition(`snapshot ${snapshot.id} belongs to group snapshot ${snapshot.groupId}: delete the group`);
}

/** Deletes a snapshot and its copy. Unknown ids are fine: delete is retried. A group's member is refused. */
export async function deleteSnapshot(core: Core, id: SnapshotId): Promise<void> {
  validateSnapshotId(id);
  await core.catalog.lock('snapshot', id, async () => {
    const snapshot = await core.catalog.getSnapshot(id);
    if (snapshot) await requireNotInGroup(core, snapshot);
    await core.catalog.removeEntry('snapshots', id);
  });
}

export async function getSnapshot(core: Core, id: SnapshotId): Promise<SnapshotRecord> {
  validateSnapshotId(id);
  const snapshot = await core.catalog.getSnapshot(id);
  if (!snapshot) throw notFound(`snapshot ${id} does not exist`);
  return snapshot;
}

export interface SnapshotFilter {
  snapshotId?: string;
  sourceVolumeId?: string;
}

/**
 * Snapshots ordered by id (the order paging relies on), narrowed by the filter. A filter naming
 * something that cannot exist (a malformed id) matches nothing rather than failing the listing.
 */
export async function listSnapshots(core: Core, filter: SnapshotFilter = {}): Promise<SnapshotRecord[]> {
  if (filter.snapshotId && !isValidId(filter.snapshotId)) return [];
  const ids = filter.snapshotId ? [filter.snapshotId] : await core.catalog.listSnapshotIds();
  const out: SnapshotRecord[] = [];
  for (const id of ids) {
    const s = await core.catalog.getSnapshot(id);
    if (s && (!filter.sourceVolumeId || s.sourceVolumeId === filter.sourceVolumeId)) out.push(s);
  }
  return out;
}
