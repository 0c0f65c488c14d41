import { alreadyExists, failedPrecondition, invalidArgument, notFound } from '../errors.js';
import type { GroupSnapshotRecord, SnapshotRecord, VolumeRecord } from '../model.js';
import { groupSnapshotIdForName, requireSameName, snapshotIdForName } from '../names.js';
import { SCHEMA_VERSION } from '../store/json-record.js';
import { type GroupSnapshotId, type SnapshotId, validateGroupSnapshotId, validateVolumeId, type VolumeId } from '../validate.js';
import { type Core, now } from './core.js';
import { withFrozen } from './freeze.js';
import { cutSnapshot, requireSnapshotable } from './snapshots.js';

/** More would hold every volume's lock for as long as the copies of all of them take. */
export const MAX_GROUP_VOLUMES = 64;

export interface GroupSnapshot {
  group: GroupSnapshotRecord;
  /** The member snapshots, in the order of `group.members`. */
  snapshots: SnapshotRecord[];
}

/**
 * Cuts snapshots of several volumes at one point in time, as CSI CreateVolumeGroupSnapshot asks: every
 * source volume's lock is held (in id order, so two groups over the same volumes cannot deadlock), the
 * filesystems staged on this node are frozen across the copies and thawed even when a copy fails
 * (shared/core/freeze.ts), and the group's record is written last. A retry after a crash finds no
 * record, removes the members the cut-short attempt made and cuts them all again: members of one
 * group never come from two moments. The same name with the same volumes answers the existing group;
 * with other volumes it is AlreadyExists.
 */
export async function createGroupSnapshot(core: Core, name: string, sourceVolumeIds: readonly VolumeId[]): Promise<GroupSnapshot> {
  const id = groupSnapshotIdForName(name, 'group snapshot name');
  const sources = checkedSources(sourceVolumeIds);
  return core.catalog.lock('group', id, async () => {
    const existing = await core.catalog.getGroup(id);
    if (existing) {
      requireSameName('group snapshot', existing, name);
      if (!sameSet(existing.sourceVolumeIds, sources))
        throw alreadyExists(`group snapshot ${id} already exists with source volumes ${existing.sourceVolumeIds.join(', ')}`);
      return withMembers(core, existing);
    }
    const sorted = [...sources].sort();
    // Node locks before catalog locks, as everywhere (shared/store/node-state.ts): no unstage while frozen.
    return withEach(sorted, (v, next) => core.nodeState.lockVolume(v, next), () =>
      withEach(sorted, (v, next) => core.catalog.lock('volume', v, next), async () => {
        const volumes = await Promise.all(sources.map((v) => core.catalog.requireVolume(v)));
        for (const v of volumes) requireSnapshotable(v);
        const plan = volumes.map((volume) => ({ volume, member: snapshotIdForName(`${id}/${volume.id}`, 'member snapshot name') }));
        const members = plan.map((p) => p.member);
        await removeStaleMembers(core, id, members);
        const createdAt = now();
        const cut = withFrozen(core, volumes, () => cutAll(core, id, plan, createdAt));
        // A failed cut leaves no members behind (a killed one leaves them for the retry to remove).
        const snapshots = await cut.catch(async (err: unknown) => {
          await removeStaleMembers(core, id, members).catch(() => undefined);
          throw err;
        });
        const group: GroupSnapshotRecord = { schema: SCHEMA_VERSION, id, ...(name !== id ? { name } : {}), sourceVolumeIds: sources, members, createdAt };
        await core.catalog.putGroup(group);
        return { group, snapshots };
      }),
    );
  });
}

/** The group, or NotFound; a list of snapshot ids, when given, must be exactly the group's. */
export async function getGroupSnapshot(core: Core, id: GroupSnapshotId, snapshotIds: readonly SnapshotId[] = []): Promise<GroupSnapshot> {
  validateGroupSnapshotId(id);
  const group = await core.catalog.getGroup(id);
  if (!group) throw notFound(`group snapshot ${id} does not exist`);
  requireMembers(group, snapshotIds);
  return withMembers(core, group);
}

/**
 * Deletes the group and its member snapshots; unknown groups are fine (delete is retried). Members go
 * first and the record last, so a crash in between leaves a record whose retry finishes the job.
 */
export async function deleteGroupSnapshot(core: Core, id: GroupSnapshotId, snapshotIds: readonly SnapshotId[] = []): Promise<void> {
  validateGroupSnapshotId(id);
  await core.catalog.lock('group', id, async () => {
    const group = await core.catalog.getGroup(id);
    if (!group) return;
    requireMembers(group, snapshotIds);
    for (const member of group.members) await core.catalog.lock('snapshot', member, () => core.catalog.removeEntry('snapshots', member));
    await core.catalog.removeGroup(id);
  });
}

function checkedSources(ids: readonly VolumeId[]): VolumeId[] {
  if (!ids.length) throw invalidArgument('a group snapshot needs at least one source volume');
  if (ids.length > MAX_GROUP_VOLUMES) throw invalidArgument(`a group snapshot takes at most ${MAX_GROUP_VOLUMES} volumes, not ${ids.length}`);
  const checked = ids.map((v) => validateVolumeId(v, 'source volume id'));
  const repeated = checked.find((v, i) => checked.indexOf(v) !== i);
  if (repeated) throw invalidArgument(`source volume ${repeated} is named twice`);
  return checked;
}

function requireMembers(group: GroupSnapshotRecord, snapshotIds: readonly SnapshotId[]): void {
  if (snapshotIds.length && !sameSet(group.members, snapshotIds))
    throw failedPrecondition(`the snapshot ids given are not those of group snapshot ${group.id} (${group.members.join(', ')})`);
}

const sameSet = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && [...a].sort().join('\0') === [...b].sort().join('\0');

async function withMembers(core: Core, group: GroupSnapshotRecord): Promise<GroupSnapshot> {
  const snapshots: SnapshotRecord[] = [];
  for (const member of group.members) {
    const s = await core.catalog.getSnapshot(member);
    if (!s) throw failedPrecondition(`member snapshot ${member} of group snapshot ${group.id} is missing`);
    snapshots.push(s);
  }
  return { group, snapshots };
}

async function removeStaleMembers(core: Core, id: GroupSnapshotId, members: readonly SnapshotId[]): Promise<void> {
  for (const member of members) {
    const stale = await core.catalog.getSnapshot(member);
    if (!stale) continue;
    if (stale.groupId !== id) throw alreadyExists(`snapshot id ${member} already belongs to another snapshot`);
    await core.catalog.removeEntry('snapshots', member);
  }
}

async function cutAll(core: Core, id: GroupSnapshotId, plan: readonly { volume: VolumeRecord; member: SnapshotId }[], createdAt: string): Promise<SnapshotRecord[]> {
  const snapshots: SnapshotRecord[] = [];
  for (const { volume, member } of plan) snapshots.push(await cutSnapshot(core, volume, member, { name: `${id}/${volume.id}`, createdAt, groupId: id }));
  return snapshots;
}

/** Runs `fn` inside `lock` of every id, taken one inside the other in the order given. */
function withEach<T>(ids: readonly string[], lock: (id: string, next: () => Promise<T>) => Promise<T>, fn: () => Promise<T>): Promise<T> {
  const [first, ...rest] = ids;
  if (first === undefined) return fn();
  return lock(first, () => withEach(rest, lock, fn));
}
