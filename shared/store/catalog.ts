import { createHash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { alreadyExists, errnoCode, notFound, TwinvolError } from '../errors.js';
import type { GroupSnapshotRecord, NodeRecord, PvRecord, SnapshotRecord, VolumeRecord } from '../model.js';
import { validateGroupSnapshotId, validateNodeName, validatePvName, validateSnapshotId, validateVolumeId, type VolumeId } from '../validate.js';
import { readRecord, removeRecord, SCHEMA_VERSION, writeLockedRecord, writeRecord } from './json-record.js';
import { RECORD_SCHEMAS } from './record-schemas.js';
import { type LockOptions, withLock } from './lock.js';
import { type Entity, WorkArea, type WorkEntry } from './work-area.js';

const LOCK_OF: Record<Entity, 'volume' | 'snapshot'> = { volumes: 'volume', snapshots: 'snapshot' };
/** How long volumes/ must have been unchanged before a listing of it is kept (listVolumeIds). */
const LISTING_SETTLED_MS = 2_000;

/**
 * The cluster-scope catalog under the data root:
 *   volumes/<id>/volume.json (+ image.img or data/), snapshots/<id>/snapshot.json (+ copy),
 *   pvs/<pvName>.json, nodes/<nodeId>.json, groupsnapshots/<id>.json, locks/, and .work/ for entries being built or torn down.
 * An entry appears and disappears by a single rename of its directory, so a crash never leaves a
 * half-made volume under volumes/: at worst a leftover under .work/, which the next holder of that
 * entry's lock removes (`sweepEntry`), as does a server starting (`sweepAbandoned`).
 */
export class Catalog {
  readonly work: WorkArea;
  /** The last settled listing of volumes/ and the directory state it was read in (listVolumeIds). */
  private volumeIds: { key: string; ids: readonly string[] } | undefined;

  constructor(readonly root: string) {
    this.work = new WorkArea(join(root, '.work'));
  }

  volumeDir(id: string): string {
    return join(this.root, 'volumes', validateVolumeId(id));
  }
  imagePath(id: string): string {
    return join(this.volumeDir(id), 'image.img');
  }
  dataDir(id: string): string {
    return join(this.volumeDir(id), 'data');
  }
  snapshotDir(id: string): string {
    return join(this.root, 'snapshots', validateSnapshotId(id));
  }

  getVolume(id: string): Promise<VolumeRecord | undefined> {
    return readRecord(join(this.volumeDir(id), 'volume.json'), RECORD_SCHEMAS.volume);
  }

  async requireVolume(id: string): Promise<VolumeRecord> {
    const v = await this.getVolume(id);
    if (!v) throw notFound(`volume ${id} does not exist`);
    return v;
  }

  getSnapshot(id: string): Promise<SnapshotRecord | undefined> {
    return readRecord(join(this.snapshotDir(id), 'snapshot.json'), RECORD_SCHEMAS.snapshot);
  }

  /**
   * The volume ids, sorted. A long-running server lists often (ListVolumes pages, metrics), and at
   * 10,000 volumes the readdir and sort cost more than the page itself, so the sorted list is kept
   * while the directory is unchanged: its inode, mtime, ctime and link count (every volume is a
   * subdirectory, so each create and delete changes the count). A listing is only kept once the
   * directory has been still for LISTING_SETTLED_MS: a change within one timestamp tick of the
   * listing cannot leave the same mtime behind. Callers must not change the array.
   */
  async listVolumeIds(): Promise<readonly string[]> {
    const dir = join(this.root, 'volumes');
    let st: BigIntStats;
    try {
      st = await stat(dir, { bigint: true });
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
    const key = `${st.ino}:${st.mtimeNs}:${st.ctimeNs}:${st.nlink}`;
    if (this.volumeIds?.key === key) return this.volumeIds.ids;
    const ids = await this.listNames('volumes');
    const settled = Date.now() - Number(st.mtimeNs / 1_000_000n) > LISTING_SETTLED_MS && Date.now() - Number(st.ctimeNs / 1_000_000n) > LISTING_SETTLED_MS;
    this.volumeIds = settled ? { key, ids } : undefined;
    return ids;
  }
  listSnapshotIds(): Promise<string[]> {
    return this.listNames('snapshots');
  }

  private async listNames(dir: Entity | 'nodes'): Promise<string[]> {
    try {
      const names = await readdir(join(this.root, dir));
      return names.filter((n) => !n.startsWith('.')).sort();
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
  }

  /** Serialises catalog changes to one entry across processes and nodes sharing the root. */
  lock<T>(entity: 'volume' | 'snapshot' | 'pv' | 'node' | 'group', id: string, fn: () => Promise<T>, options?: LockOptions): Promise<T> {
    return withLock(join(this.root, 'locks', fileNameFor(`${entity}-${id}`, '.lock')), fn, options);
  }

  /**
   * Removes the work a crashed create or delete of this entry left behind. The caller holds the
   * entry's lock, and every create and delete holds it throughout, so nobody alive owns that work.
   */
  async sweepEntry(entity: Entity, id: string): Promise<WorkEntry[]> {
    const mine = (await this.work.list()).entries.filter((e) => e.entity === entity && e.id === id);
    await this.work.remove(mine);
    return mine;
  }

  /**
   * Removes every abandoned entry in .work (at start-up and before each create): one whose entry's lock
   * can be taken at once, or is `held` by the caller. A busy lock means a live create or delete owns
   * the work (or a crashed holder's lock is not yet taken over), and it is left for later.
   */
  async sweepAbandoned(held?: { entity: Entity; id: string }): Promise<{ removed: WorkEntry[]; busy: WorkEntry[]; foreign: string[] }> {
    const { entries, foreign } = await this.work.list();
    const removed: WorkEntry[] = [];
    const busy: WorkEntry[] = [];
    const byEntry = new Map<string, WorkEntry[]>();
    for (const e of entries) byEntry.set(`${e.entity}@${e.id}`, [...(byEntry.get(`${e.entity}@${e.id}`) ?? []), e]);
    for (const [first, ...rest] of byEntry.values()) {
      if (!first) continue;
      if (held && first.entity === held.entity && first.id === held.id) {
        removed.push(...(await this.sweepEntry(first.entity, first.id)));
        continue;
      }
      try {
        removed.push(...(await this.lock(LOCK_OF[first.entity], first.id, () => this.sweepEntry(first.entity, first.id), { waitMs: 0 })));
      } catch (err) {
        if (!(err instanceof TwinvolError && err.code === 'Aborted')) throw err;
        busy.push(first, ...rest);
      }
    }
    return { removed, busy, foreign };
  }

  /** Read-modify-write of a volume record under its lock. */
  updateVolume(id: string, change: (v: VolumeRecord) => VolumeRecord): Promise<VolumeRecord> {
    return this.lock('volume', id, async () => {
      const next = change(await this.requireVolume(id));
      await this.updateVolumeUnlocked(next);
      return next;
    });
  }

  /** Writes a volume record; the caller holds the volume's lock. */
  updateVolumeUnlocked(record: VolumeRecord): Promise<void> {
    return writeLockedRecord(join(this.volumeDir(record.id), 'volume.json'), record);
  }

  /**
   * Builds a new entry in a private work directory (`populate` fills it), writes its record last, then
   * renames the directory into place. Rename refuses a non-empty target, so two racing creators
   * cannot both win; the loser gets AlreadyExists and compares what exists.
   */
  async createEntry<R extends VolumeRecord | SnapshotRecord>(
    entity: Entity,
    record: R,
    populate: (workDir: string) => Promise<void>,
  ): Promise<void> {
    const finalDir = entity === 'volumes' ? this.volumeDir(record.id) : this.snapshotDir(record.id);
    await this.sweepAbandoned({ entity, id: record.id });
    const workDir = await this.work.make('new', entity, record.id);
    await mkdir(join(this.root, entity), { recursive: true, mode: 0o700 });
    await mkdir(workDir, { mode: 0o700 });
    try {
      await populate(workDir);
      await writeRecord(join(workDir, entity === 'volumes' ? 'volume.json' : 'snapshot.json'), record);
      await rename(workDir, finalDir);
    } catch (err) {
      await rm(workDir, { recursive: true, force: true });
      if (errnoCode(err) === 'ENOTEMPTY' || errnoCode(err) === 'EEXIST') throw alreadyExists(`${entity.slice(0, -1)} ${record.id} already exists`);
      throw err;
    }
  }

  /** Removes an entry by renaming it out of sight first (the atomic step), then deleting its data. */
  async removeEntry(entity: Entity, id: string): Promise<void> {
    const dir = entity === 'volumes' ? this.volumeDir(id) : this.snapshotDir(id);
    await this.sweepEntry(entity, id);
    const trash = await this.work.make('trash', entity, id);
    try {
      await rename(dir, trash);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      throw err;
    }
    await rm(trash, { recursive: true, force: true });
  }

  pvPath(pvName: string): string {
    return join(this.root, 'pvs', fileNameFor(validatePvName(pvName), '.json'));
  }

  async pvVolume(pvName: string): Promise<VolumeId | undefined> {
    const record = await readRecord(this.pvPath(pvName), RECORD_SCHEMAS.pv);
    return record?.pvName === pvName ? record.volumeId : undefined;
  }

  async recordPv(pvName: string, volumeId: VolumeId): Promise<void> {
    const existing = await this.pvVolume(pvName);
    if (existing === volumeId) return;
    await writeRecord<PvRecord>(this.pvPath(pvName), { schema: SCHEMA_VERSION, pvName, volumeId });
  }

  forgetPv(pvName: string): Promise<void> {
    return removeRecord(this.pvPath(pvName));
  }

  groupPath(id: string): string {
    return join(this.root, 'groupsnapshots', `${validateGroupSnapshotId(id)}.json`);
  }

  getGroup(id: string): Promise<GroupSnapshotRecord | undefined> {
    return readRecord(this.groupPath(id), RECORD_SCHEMAS.group);
  }

  putGroup(record: GroupSnapshotRecord): Promise<void> {
    return writeRecord(this.groupPath(record.id), record);
  }

  removeGroup(id: string): Promise<void> {
    return removeRecord(this.groupPath(id));
  }

  nodePath(nodeId: string): string {
    return join(this.root, 'nodes', fileNameFor(validateNodeName(nodeId), '.json'));
  }

  /** A long id shares its file name's prefix with others: the record names the node it is about. */
  async getNode(nodeId: string): Promise<NodeRecord | undefined> {
    const record = await readRecord(this.nodePath(nodeId), RECORD_SCHEMAS.node);
    return record?.nodeId === nodeId ? record : undefined;
  }

  putNode(record: NodeRecord): Promise<void> {
    return writeRecord(this.nodePath(record.nodeId), record);
  }

  async listNodes(): Promise<NodeRecord[]> {
    const out: NodeRecord[] = [];
    for (const name of await this.listNames('nodes')) {
      if (!name.endsWith('.json')) continue;
      const record = await readRecord(join(this.root, 'nodes', name), RECORD_SCHEMAS.node);
      if (record) out.push(record);
    }
    return out.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
  }
}

/**
 * Kubernetes names (PVs, nodes) may be 253 characters and a file name only 255 bytes: a name too long
 * for `<name><suffix>` is stored under its first 160 characters and a hash of the whole, joined by an
 * `@` that no Kubernetes name holds (so no short name can fall on a long name's file). Records keep
 * the full name, and their readers check it.
 */
function fileNameFor(name: string, suffix: string): string {
  if (name.length + suffix.length <= 255) return `${name}${suffix}`;
  return `${name.slice(0, 160)}@${createHash('sha256').update(name).digest('hex').slice(0, 32)}${suffix}`;
}
