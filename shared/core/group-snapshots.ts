import { alreadyExists, failedPrecondition, invalidArgument, notFound } from '../errors.js';
import type { GroupSnapshotRecord, SnapshotRecord, VolumeRecord } from '../model.js';
import { groupSnapshotIdForName, requireSameName, snapshotIdForName } from '../names.js';
import { SCHEMA_VERSION } from '../store/json-record.js';
import { type GroupSnapshotId, MAX_ID_BYTES, type SnapshotId, validateGroupSnapshotId, validateVolumeId, type VolumeId } from '../validate.js';
import { sha256Hex } from '../sha256.js';
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
    const entries = sources.map((volumeId) => {
      const name = memberName(id, volumeId);
      return { volumeId, name, member: snapshotIdForName(name, 'member snapshot name') };
    });
    const members = entries.map((e) => e.member);
    // Node locks before catalog locks, as everywhere (shared/store/node-state.ts): no unstage while
    // frozen. Each member's snapshot lock before the volume locks, in createSnapshot's order
    // (shared/core/snapshots.ts): a member's work in .work/ is then its lock holder's, which every
    // other create's sweep leaves alone. Without them, any create meanwhile found the lock free and
    // removed a member's copy as it was made, and the group answered ready with files missing.
    return withEach(sorted, (v, next) => core.nodeState.lockVolume(v, next), () =>
      withEach([...members].sort(), (m, next) => core.catalog.lock('snapshot', m, next), () =>
      withEach(sorted, (v, next) => core.catalog.lock('volume', v, next), async () => {
        const plan = await Promise.all(entries.map(async (e) => ({ ...e, volume: await core.catalog.requireVolume(e.volumeId) })));
        const volumes = plan.map((p) => p.volume);
        for (const v of volumes) requireSnapshotable(v);
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
      ),
    );
  });
}

/**
 * A member snapshot's name, from which its id comes: `<group id>/<volume id>`, as before; where that
 * passes a name's 128 bytes (a long group name and a long volume id, each within the limit), a name
 * made from their digest, so that no valid pair is refused.
 */
function memberName(group: GroupSnapshotId, volume: VolumeId): string {
  const joined = `${group}/${volume}`;
  return Buffer.byteLength(joined) <= MAX_ID_BYTES ? joined : `group-member-${sha256Hex(joined)}`;
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
    if (!group) return removeOrphanMembers(core, id);
    requireMembers(group, snapshotIds);
    for (const member of group.members) await core.catalog.lock('snapshot', member, () => core.catalog.removeEntry('snapshots', member));
    await core.catalog.removeGroup(id);
  });
}

/**
 * The members an attempt cut short left (a killed server: members are renamed into place one by one,
 * the group's record last). Without this, a delete of a group that never got its record answered OK
 * and left full copies that only a retried create of the same name would ever remove. The caller
 * holds the group's lock, which every create of the group holds throughout.
 */
async function removeOrphanMembers(core: Core, id: GroupSnapshotId): Promise<void> {
  const isMember = async (snapshotId: string) => (await core.catalog.getSnapshot(snapshotId).catch(() => undefined))?.groupId === id;
  for (const snapshotId of await core.catalog.listSnapshotIds()) {
    // A snapshot's group never changes: only a member's lock is taken (a retried delete reads the rest),
    // and a record that cannot be read is not this group's to judge (`twinvol status` names it).
    if (!(await isMember(snapshotId))) continue;
    await core.catalog.lock('snapshot', snapshotId, async () => {
      if (await isMember(snapshotId)) await core.catalog.removeEntry('snapshots', snapshotId);
    });
  }
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

async function cutAll(core: Core, id: GroupSnapshotId, plan: readonly { volume: VolumeRecord; member: SnapshotId; name: string }[], createdAt: string): Promise<SnapshotRecord[]> {
  const snapshots: SnapshotRecord[] = [];
  for (const { volume, member, name } of plan) snapshots.push(await cutSnapshot(core, volume, member, { name, createdAt, groupId: id }));
  return snapshots;
}

/** Runs `fn` inside `lock` of every id, taken one inside the other in the order given. */
function withEach<T>(ids: readonly string[], lock: (id: string, next: () => Promise<T>) => Promise<T>, fn: () => Promise<T>): Promise<T> {
  const [first, ...rest] = ids;
  if (first === undefined) return fn();
  return lock(first, () => withEach(rest, lock, fn));
}
