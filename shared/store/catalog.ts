import { type BigIntStats, mkdirSync, renameSync, type Stats, statSync } from 'node:fs';
import { readdir, stat, walkCalls } from '../fs-async.js';
import { join } from 'node:path';
import { alreadyExists, errnoCode, notFound, TwinvolError } from '../errors.js';
import type { GroupSnapshotRecord, NodeRecord, PvRecord, SnapshotRecord, VolumeRecord } from '../model.js';
import { validateGroupSnapshotId, validateNodeName, validatePvName, validateSnapshotId, validateVolumeId, type VolumeId } from '../validate.js';
import { flushDirectory, readRecord, readRecordWithStats, removeRecord, SCHEMA_VERSION, writeLockedRecord, writeRecord } from './json-record.js';
import { RECORD_SCHEMAS } from './record-schemas.js';
import { heldByThisProcess, type LockOptions, lockState, withLock } from './lock.js';
import { type Entity, WorkArea, type WorkEntry } from './work-area.js';
import { COARSE_SETTLED_MS, hasSettled, isLocalFilesystem, nsToMs } from './filesystem.js';
import { sha256Hex } from '../sha256.js';

const LOCK_OF: Record<Entity, 'volume' | 'snapshot'> = { volumes: 'volume', snapshots: 'snapshot' };
/**
 * How old a record's file must be before its parsed record is kept for listings (listedVolume): the
 * long window on every filesystem. Reading a page's records anew costs a small file each, not the
 * whole catalog, and a record just written stays read fresh by the calls right after it.
 */
const RECORD_SETTLED_MS = COARSE_SETTLED_MS;

/** keptVolume: no kept record answers for this id, its file must be read. */
const UNKNOWN = Symbol('unknown');

/** A volume record kept for listings, and the identity of the file it was read from (identityOf). */
interface ListedRecord {
  path: string;
  identity: string;
  record: VolumeRecord;
}

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
  /** Records read for listings, by volume id (listedVolume); only ids of the last listing of volumes/ stay. */
  private readonly listed = new Map<string, ListedRecord>();

  /** volumes/ under the root, normalised once. */
  private readonly volumesDir: string;
  /** Whether the data root is on a local filesystem, once known (shared/store/filesystem.ts). */
  private local: boolean | undefined;

  constructor(readonly root: string) {
    this.work = new WorkArea(join(root, '.work'));
    this.volumesDir = join(root, 'volumes');
  }

  // A valid id is one plain path segment (shared/validate.ts: no "/", no "..", no leading "."), so
  // these paths are concatenated rather than joined: a listing asks for 10,000 of them, and
  // path.join's normalising cost more than the stat of the path.
  volumeDir(id: string): string {
    return `${this.volumesDir}/${validateVolumeId(id)}`;
  }
  /** Where a volume's record lives: every reader and writer of it asks here. */
  volumeRecordPath(id: string): string {
    return `${this.volumeDir(id)}/volume.json`;
  }
  imagePath(id: string): string {
    return `${this.volumeDir(id)}/image.img`;
  }
  dataDir(id: string): string {
    return `${this.volumeDir(id)}/data`;
  }
  snapshotDir(id: string): string {
    return join(this.root, 'snapshots', validateSnapshotId(id));
  }

  getVolume(id: string): Promise<VolumeRecord | undefined> {
    return readRecord(this.volumeRecordPath(id), RECORD_SCHEMAS.volume());
  }

  async requireVolume(id: string): Promise<VolumeRecord> {
    const v = await this.getVolume(id);
    if (!v) throw notFound(`volume ${id} does not exist`);
    return v;
  }

  /**
   * A volume's record for a listing, which may be the one this process read before: ListVolumes read
   * and parsed every record each time (10,000 volumes: about 1 s), for records that rarely change.
   * Records are only ever replaced whole, by a rename (shared/store/json-record.ts), so a changed
   * record is a new file at the path: one stat tells whether the file is still the one a kept record
   * was read from (its device, inode, size, mtime and ctime), whichever process wrote the new one.
   * An inode number is reused once its file is gone, and timestamps move in coarse ticks, so a record
   * is only kept once its file is RECORD_SETTLED_MS old: a file made in its place later has a later
   * ctime. The stat is synchronous (a few microseconds, where a round trip through libuv's threadpool
   * costs several times that), so the caller looks at a bounded batch per turn of the event loop and
   * yields between batches. The record is frozen: it is shared by every listing that finds it unchanged.
   */
  async listedVolume(id: string): Promise<VolumeRecord | undefined> {
    return (await this.listedVolumes([id]))[0];
  }

  /** `listedVolume` of each id, in order: one promise for the batch, and reads only of records not kept. */
  async listedVolumes(ids: readonly string[]): Promise<(VolumeRecord | undefined)[]> {
    const out: (VolumeRecord | undefined)[] = new Array(ids.length);
    const reads: Promise<void>[] = [];
    ids.forEach((id, i) => {
      const kept = this.keptVolume(id);
      if (kept !== UNKNOWN) out[i] = kept;
      else reads.push(this.readListed(id).then((v) => void (out[i] = v)));
    });
    if (reads.length) await Promise.all(reads);
    return out;
  }

  /**
   * The kept record of a volume while its file is unchanged, undefined once the file is gone. Never
   * throws (reads of the batch may already be under way): a stat that fails otherwise leaves the
   * record to be read, which reports the error.
   */
  private keptVolume(id: string): VolumeRecord | undefined | typeof UNKNOWN {
    const known = this.listed.get(id);
    if (!known) return UNKNOWN;
    let st: Stats | undefined | typeof UNKNOWN;
    try {
      st = statSync(known.path, { throwIfNoEntry: false });
    } catch (err) {
      st = errnoCode(err) === 'ENOTDIR' ? undefined : UNKNOWN;
    }
    if (st !== UNKNOWN && st && identityOf(st) === known.identity) return known.record;
    this.listed.delete(id);
    return st === undefined ? undefined : UNKNOWN;
  }

  private async readListed(id: string): Promise<VolumeRecord | undefined> {
    const path = this.volumeRecordPath(id);
    const read = await readRecordWithStats(path, RECORD_SCHEMAS.volume());
    if (!read) return undefined;
    const settledBefore = Date.now() - RECORD_SETTLED_MS;
    if (read.stats.ctimeMs < settledBefore && read.stats.mtimeMs < settledBefore) this.listed.set(id, { path, identity: identityOf(read.stats), record: deepFreeze(read.record) });
    return read.record;
  }

  getSnapshot(id: string): Promise<SnapshotRecord | undefined> {
    return readRecord(join(this.snapshotDir(id), 'snapshot.json'), RECORD_SCHEMAS.snapshot());
  }

  /**
   * The volume ids, sorted. A long-running server lists often (ListVolumes pages, metrics), and at
   * 10,000 volumes the readdir and sort cost more than the page itself, so the sorted list is kept
   * while the directory is unchanged: its inode, mtime, ctime and link count (every volume is a
   * subdirectory, so each create and delete changes the count). A listing is only kept once the
   * directory has settled (shared/store/filesystem.ts): a change within one timestamp tick of the
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
    this.volumeIds = hasSettled(await this.onLocalFilesystem(), nsToMs(st.mtimeNs), nsToMs(st.ctimeNs)) ? { key, ids } : undefined;
    // Records of volumes gone from the listing are dropped, so the kept ones stay as many as the volumes.
    if (this.listed.size) {
      const present = new Set(ids);
      for (const known of this.listed.keys()) if (!present.has(known)) this.listed.delete(known);
    }
    return ids;
  }
  /** Asked of the kernel once the data root exists (statfs), then remembered. */
  private async onLocalFilesystem(): Promise<boolean> {
    this.local ??= await isLocalFilesystem(this.root);
    return this.local ?? false;
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

  /**
   * Work in .work/ that nobody alive owns: every create and delete holds its entry's lock for as long
   * as its work exists, so work whose lock is free or abandoned is a killed call's. Judged without
   * taking the locks (`twinvol status`); sweepAbandoned is what removes it.
   */
  async abandonedWork(): Promise<WorkEntry[]> {
    const out: WorkEntry[] = [];
    for (const e of (await this.work.list()).entries) if ((await lockState(this.lockPath(LOCK_OF[e.entity], e.id))) !== 'held') out.push(e);
    return out;
  }

  private lockPath(entity: 'volume' | 'snapshot' | 'pv' | 'node' | 'group', id: string): string {
    return join(this.root, 'locks', fileNameFor(`${entity}-${id}`, '.lock'));
  }

  /** Serialises catalog changes to one entry across processes and nodes sharing the root. */
  lock<T>(entity: 'volume' | 'snapshot' | 'pv' | 'node' | 'group', id: string, fn: () => Promise<T>, options?: LockOptions): Promise<T> {
    return withLock(this.lockPath(entity, id), fn, options);
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
      // A call of this process is behind it: busy, without a try at its lock (a CSI server with 16
      // creates in flight made 15 failed tries before each create).
      if (heldByThisProcess(this.lockPath(LOCK_OF[first.entity], first.id))) {
        busy.push(first, ...rest);
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
    return writeLockedRecord(this.volumeRecordPath(record.id), record);
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
    // The directory steps are synchronous, as record writes are (shared/store/json-record.ts).
    mkdirSync(join(this.root, entity), { recursive: true, mode: 0o700 });
    mkdirSync(workDir, { mode: 0o700 });
    try {
      await populate(workDir);
      await writeRecord(join(workDir, entity === 'volumes' ? 'volume.json' : 'snapshot.json'), record);
      renameSync(workDir, finalDir);
    } catch (err) {
      await walkCalls.rmTree(workDir);
      if (errnoCode(err) === 'ENOTEMPTY' || errnoCode(err) === 'EEXIST') throw alreadyExists(`${entity.slice(0, -1)} ${record.id} already exists`);
      throw err;
    }
    // The rename is the create: once answered, it must survive a power loss as the record does. Past
    // the rename there is no work directory left to clean up, whatever the fsync says.
    await flushDirectory(join(this.root, entity));
  }

  /** Removes an entry by renaming it out of sight first (the atomic step), then deleting its data. */
  async removeEntry(entity: Entity, id: string): Promise<void> {
    const dir = entity === 'volumes' ? this.volumeDir(id) : this.snapshotDir(id);
    await this.sweepEntry(entity, id);
    const trash = await this.work.make('trash', entity, id);
    try {
      renameSync(dir, trash);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      throw err;
    }
    await walkCalls.rmTree(trash);
  }

  pvPath(pvName: string): string {
    return join(this.root, 'pvs', fileNameFor(validatePvName(pvName), '.json'));
  }

  async pvVolume(pvName: string): Promise<VolumeId | undefined> {
    const record = await readRecord(this.pvPath(pvName), RECORD_SCHEMAS.pv());
    return record?.pvName === pvName ? record.volumeId : undefined;
  }

  /** Writes what `pvName` stands for; whether it may (and needs to) is shared/core/pv-names.ts's to say. */
  recordPv(pvName: string, volumeId: VolumeId): Promise<void> {
    return writeRecord<PvRecord>(this.pvPath(pvName), { schema: SCHEMA_VERSION, pvName, volumeId });
  }

  forgetPv(pvName: string): Promise<void> {
    return removeRecord(this.pvPath(pvName));
  }

  groupPath(id: string): string {
    return join(this.root, 'groupsnapshots', `${validateGroupSnapshotId(id)}.json`);
  }

  getGroup(id: string): Promise<GroupSnapshotRecord | undefined> {
    return readRecord(this.groupPath(id), RECORD_SCHEMAS.group());
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
    const record = await readRecord(this.nodePath(nodeId), RECORD_SCHEMAS.node());
    return record?.nodeId === nodeId ? record : undefined;
  }

  putNode(record: NodeRecord): Promise<void> {
    return writeRecord(this.nodePath(record.nodeId), record);
  }

  async listNodes(): Promise<NodeRecord[]> {
    const out: NodeRecord[] = [];
    for (const name of await this.listNames('nodes')) {
      if (!name.endsWith('.json')) continue;
      const record = await readRecord(join(this.root, 'nodes', name), RECORD_SCHEMAS.node());
      if (record) out.push(record);
    }
    return out.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
  }
}

/** Which file a stat describes, as far as listedVolume needs to tell a replaced record from the one it read. */
function identityOf(st: Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * Kubernetes names (PVs, nodes) may be 253 characters and a file name only 255 bytes: a name too long
 * for `<name><suffix>` is stored under its first 160 characters and a hash of the whole, joined by an
 * `@` that no Kubernetes name holds (so no short name can fall on a long name's file). Records keep
 * the full name, and their readers check it.
 */
function fileNameFor(name: string, suffix: string): string {
  if (name.length + suffix.length <= 255) return `${name}${suffix}`;
  return `${name.slice(0, 160)}@${sha256Hex(name).slice(0, 32)}${suffix}`;
}
