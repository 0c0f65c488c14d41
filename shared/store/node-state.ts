import { readdirSync } from 'node:fs';
import { mkdir, readdir, rm, writeFile } from '../fs-async.js';
import { join } from 'node:path';
import { errnoCode } from '../errors.js';
import type { MountRecord } from '../model.js';
import { readRecord, removeRecord, writeRecord } from './json-record.js';
import { RECORD_SCHEMAS } from './record-schemas.js';
import { withLock } from './lock.js';
import { isVolatileFilesystem } from './filesystem.js';
import { sha256Hex } from '../sha256.js';

/**
 * Node-scope records under the state directory: one file per mount twinvol made, named
 * `<volumeId>@<hash of path>.json`, so a lookup by path (unmount, unmountdevice) and by volume
 * (reference counts) are both one readdir of names without reading other records.
 */
export class NodeState {
  /** Whether the state dir is on a tmpfs, once known (see `onTmpfs`). */
  private volatile: boolean | undefined;

  constructor(readonly root: string) {}

  /**
   * Node state describes mounts, and a reboot clears both, so on a tmpfs (where docs/architecture.md
   * puts it) an fsync buys nothing: asked of the kernel once per process (statfs), then remembered.
   * A state dir not made yet is asked again next time; anything else unknown keeps the fsync.
   */
  private async onTmpfs(): Promise<boolean> {
    this.volatile ??= await isVolatileFilesystem(this.root);
    return this.volatile ?? false;
  }

  private get mountsDir(): string {
    return join(this.root, 'mounts');
  }

  private fileName(volumeId: string, path: string): string {
    return `${volumeId}@${pathKey(path)}.json`;
  }

  /** Serialises node-side work on one volume. Taken before the catalog lock whenever both are needed. */
  lockVolume<T>(volumeId: string, fn: () => Promise<T>): Promise<T> {
    return withLock(join(this.root, 'locks', `${volumeId}.lock`), fn);
  }

  /** Synchronous, as the store's other file calls (shared/store/json-record.ts): a tmpfs directory of a node's mounts. */
  private async names(): Promise<string[]> {
    try {
      return readdirSync(this.mountsDir);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
  }

  async findByPath(path: string): Promise<MountRecord | undefined> {
    const suffix = `@${pathKey(path)}.json`;
    for (const name of await this.names()) {
      if (!name.endsWith(suffix)) continue;
      const rec = await readRecord(join(this.mountsDir, name), RECORD_SCHEMAS.mount());
      if (rec?.path === path) return rec;
    }
    return undefined;
  }

  async listForVolume(volumeId: string): Promise<MountRecord[]> {
    const prefix = `${volumeId}@`;
    const out: MountRecord[] = [];
    for (const name of await this.names()) {
      if (!name.startsWith(prefix) || !name.endsWith('.json')) continue;
      const rec = await readRecord(join(this.mountsDir, name), RECORD_SCHEMAS.mount());
      if (rec) out.push(rec);
    }
    return out.sort((a, b) => a.path.localeCompare(b.path));
  }

  async listAll(): Promise<MountRecord[]> {
    const out: MountRecord[] = [];
    for (const name of await this.names()) {
      if (!name.endsWith('.json')) continue;
      const rec = await readRecord(join(this.mountsDir, name), RECORD_SCHEMAS.mount());
      if (rec) out.push(rec);
    }
    return out;
  }

  /**
   * A killed writer's temporary file is swept when the record is removed (`removeRecord`), as every
   * mount record is at its unmount: no readdir of the whole mounts dir on every mount.
   */
  async put(record: MountRecord): Promise<void> {
    await writeRecord(join(this.mountsDir, this.fileName(record.volumeId, record.path)), record, { fsync: !(await this.onTmpfs()) });
  }

  remove(record: Pick<MountRecord, 'volumeId' | 'path'>): Promise<void> {
    return removeRecord(join(this.mountsDir, this.fileName(record.volumeId, record.path)));
  }

  /**
   * Freeze markers: an empty file under frozen/ named like the staging's mount record, made before
   * `fsfreeze --freeze` and removed after the thaw. A process killed in between leaves the marker, and
   * the next server start (thawAbandonedFreezes, shared/core/freeze.ts) thaws what it names; a frozen filesystem blocks every
   * writer on the node until someone does.
   */
  async markFrozen(record: MountRecord): Promise<void> {
    await mkdir(join(this.root, 'frozen'), { recursive: true, mode: 0o700 });
    await writeFile(join(this.root, 'frozen', this.fileName(record.volumeId, record.path)), '', { mode: 0o600 });
  }

  async unmarkFrozen(record: MountRecord): Promise<void> {
    await rm(join(this.root, 'frozen', this.fileName(record.volumeId, record.path)), { force: true });
  }

  /** The stagings a freeze marker names; a marker whose record is gone names nothing left to thaw. */
  async frozen(): Promise<{ record?: MountRecord; clear: () => Promise<void> }[]> {
    let names: string[];
    try {
      names = await readdir(join(this.root, 'frozen'));
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
    const out: { record?: MountRecord; clear: () => Promise<void> }[] = [];
    for (const name of names) {
      const record = await readRecord(join(this.mountsDir, name), RECORD_SCHEMAS.mount());
      const clear = () => rm(join(this.root, 'frozen', name), { force: true });
      out.push({ clear, ...(record ? { record } : {}) });
    }
    return out;
  }
}

export function pathKey(path: string): string {
  return sha256Hex(path).slice(0, 32);
}
