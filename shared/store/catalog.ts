import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { alreadyExists, errnoCode, notFound } from '../errors.js';
import type { PvRecord, SnapshotRecord, VolumeRecord } from '../model.js';
import { validatePvName, validateSnapshotId, validateVolumeId } from '../validate.js';
import { readRecord, removeRecord, SCHEMA_VERSION, writeRecord } from './json-record.js';
import { RECORD_SCHEMAS } from './record-schemas.js';
import { withLock } from './lock.js';

type Entity = 'volumes' | 'snapshots';

/**
 * The cluster-scope catalog under the data root:
 *   volumes/<id>/volume.json (+ image.img or data/), snapshots/<id>/snapshot.json (+ copy),
 *   pvs/<pvName>.json, locks/, and .work/ for entries being built or torn down.
 * An entry appears and disappears by a single rename of its directory, so a crash never leaves a
 * half-made volume under volumes/: at worst a leftover under .work/, which `sweep` removes.
 */
export class Catalog {
  constructor(readonly root: string) {}

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

  listVolumeIds(): Promise<string[]> {
    return this.listIds('volumes');
  }
  listSnapshotIds(): Promise<string[]> {
    return this.listIds('snapshots');
  }

  private async listIds(entity: Entity): Promise<string[]> {
    try {
      const names = await readdir(join(this.root, entity));
      return names.filter((n) => !n.startsWith('.')).sort();
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
  }

  /** Serialises catalog changes to one volume or snapshot across processes and nodes sharing the root. */
  lock<T>(entity: 'volume' | 'snapshot' | 'pv', id: string, fn: () => Promise<T>): Promise<T> {
    return withLock(join(this.root, 'locks', `${entity}-${id}.lock`), fn);
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
    return writeRecord(join(this.volumeDir(record.id), 'volume.json'), record);
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
    const workDir = join(this.root, '.work', `${entity}-${record.id}-${randomBytes(4).toString('hex')}`);
    await mkdir(join(this.root, entity), { recursive: true, mode: 0o700 });
    await mkdir(workDir, { recursive: true, mode: 0o700 });
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
    const trash = join(this.root, '.work', `trash-${id}-${randomBytes(4).toString('hex')}`);
    await mkdir(join(this.root, '.work'), { recursive: true, mode: 0o700 });
    try {
      await rename(dir, trash);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return;
      throw err;
    }
    await rm(trash, { recursive: true, force: true });
  }

  pvPath(pvName: string): string {
    return join(this.root, 'pvs', `${validatePvName(pvName)}.json`);
  }

  async pvVolume(pvName: string): Promise<string | undefined> {
    return (await readRecord(this.pvPath(pvName), RECORD_SCHEMAS.pv))?.volumeId;
  }

  async recordPv(pvName: string, volumeId: string): Promise<void> {
    const existing = await this.pvVolume(pvName);
    if (existing === volumeId) return;
    await writeRecord<PvRecord>(this.pvPath(pvName), { schema: SCHEMA_VERSION, pvName, volumeId });
  }

  forgetPv(pvName: string): Promise<void> {
    return removeRecord(this.pvPath(pvName));
  }
}
