import { close, fstat, open, read, type Stats } from 'node:fs';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import writeFileAtomic from 'write-file-atomic';
import type { ZodMiniType } from 'zod/mini';
import { errnoCode, internal, systemError } from '../errors.js';
import { describeIssues } from './record-schemas.js';

/**
 * Bumped when a record's shape changes; readers refuse records from a newer version (their strict
 * schemas would refuse its new keys anyway, with a less helpful message). 2: volumes keep their name,
 * access requests and topology; snapshots their name; node records. 3: group snapshots, a snapshot's
 * group, and an attachment's inUse and fenced marks. 4: an attachment's implicit mark. 5: a block
 * volume's madeFilesystem. Records of versions 1 to 4 parse as they are.
 */
export const SCHEMA_VERSION = 5;

export interface Versioned {
  schema: number;
}

/**
 * What the store did in this process, for the tests that assert the work each FlexVolume verb and
 * CSI RPC does (test/perf/counts.test.ts): record files read (found or not), fsyncs, locks taken.
 * Plain increments: cheap enough to stay on in production.
 */
export interface StoreCounts {
  reads: number;
  fsyncs: number;
  locks: number;
}
export const storeCounts: StoreCounts = { reads: 0, fsyncs: 0, locks: 0 };

/**
 * What to do about a record that is not one: it was not half written (writes are atomic), so it was
 * changed by hand, by another program or by damage, and only an operator can tell which.
 */
const REPAIR = 'twinvol writes its records whole, so something else changed this one: restore it from a backup, or move it aside if what it describes is gone';

/**
 * Reads one record and parses it with its schema (shared/store/record-schemas.ts). A missing file is
 * `undefined`; anything else that is not a record of this version is an error naming the file and
 * what is wrong, because atomic writes mean it was changed by something other than this twinvol.
 */
export async function readRecord<T extends Versioned>(path: string, schema: ZodMiniType<T>): Promise<T | undefined> {
  let text: string;
  storeCounts.reads++;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if (isAbsent(err)) return undefined;
    throw err;
  }
  return parseRecord(path, text, schema);
}

/**
 * `readRecord`, with the stat of the very file the record was read from (open, fstat and read on one
 * descriptor), for a cache that later asks whether the file at the path is still that one
 * (Catalog.listedVolume). A stat of the path before or after the read could describe another file.
 */
export async function readRecordWithStats<T extends Versioned>(path: string, schema: ZodMiniType<T>): Promise<{ record: T; stats: Stats } | undefined> {
  storeCounts.reads++;
  const found = await readWithStats(path);
  return found && { record: parseRecord(path, found.text, schema), stats: found.stats };
}

/**
 * open, fstat, read and close through fs's callbacks: one promise per file, where FileHandle's
 * promises cost four and a handle the collector tracks (a listing reads up to 10,000 records).
 */
function readWithStats(path: string): Promise<{ text: string; stats: Stats } | undefined> {
  return new Promise((resolve, reject) => {
    open(path, 'r', (openErr, fd) => {
      if (openErr) return isAbsent(openErr) ? resolve(undefined) : reject(openErr);
      const finish = (err: Error | null, value?: { text: string; stats: Stats }) => close(fd, () => (err ? reject(err) : resolve(value)));
      fstat(fd, (statErr, stats) => {
        if (statErr) return finish(statErr);
        // A record's file never changes once it is at its path (it is replaced by a rename), so its
        // size is what to read: one read, where readFile would fstat again and read until the end.
        const buffer = Buffer.allocUnsafe(stats.size);
        const readFrom = (filled: number): void => {
          if (filled === buffer.length) return finish(null, { text: buffer.toString('utf8'), stats });
          read(fd, buffer, filled, buffer.length - filled, filled, (readErr, bytesRead) => {
            if (readErr) return finish(readErr);
            if (!bytesRead) return finish(null, { text: buffer.toString('utf8', 0, filled), stats });
            readFrom(filled + bytesRead);
          });
        };
        readFrom(0);
      });
    });
  });
}

function isAbsent(err: unknown): boolean {
  return errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR';
}

function parseRecord<T extends Versioned>(path: string, text: string, schema: ZodMiniType<T>): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw internal(`state record ${path} is corrupt (not JSON); ${REPAIR}`);
  }
  const version = typeof value === 'object' && value !== null && 'schema' in value ? value.schema : undefined;
  if (typeof version !== 'number') throw internal(`state record ${path} has no schema version; ${REPAIR}`);
  if (version > SCHEMA_VERSION) throw internal(`state record ${path} was written by a newer twinvol (schema ${version}); run that version of twinvol, or a newer one, here`);
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw internal(`state record ${path} does not parse: ${describeIssues(parsed.error)}; ${REPAIR}`);
  return parsed.data;
}

export interface WriteOptions {
  /**
   * false: no fsync, for records on a filesystem that a power loss clears anyway (node state on a
   * tmpfs: shared/store/node-state.ts). The rename keeps the write atomic either way.
   */
  fsync?: boolean;
}

/**
 * Writes a record in one atomic step: a temporary file beside it, fsync, rename. A crash at any point
 * leaves either the old record or the new one, never a mix; write-file-atomic also serialises writers
 * to the same path inside one process and cleans its temporary file on failure. A SIGKILL, though,
 * leaves that temporary file: `writeLockedRecord` and `removeRecord` sweep it.
 */
export async function writeRecord<T extends Versioned>(path: string, record: T, options: WriteOptions = {}): Promise<void> {
  const fsync = options.fsync ?? true;
  try {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    // Written to a temporary file and renamed over: a failure here leaves the previous record whole.
    if (fsync) storeCounts.fsyncs++;
    await writeFileAtomic(path, `${JSON.stringify(record, null, 2)}\n`, { fsync, mode: 0o600 });
  } catch (err) {
    throw systemError(err, path) ?? err;
  }
}

/**
 * `writeRecord` for a long-lived record whose every writer holds its lock (the caller does now): any
 * temporary file of it that exists is a killed writer's, and goes first (a volume record lives until
 * its volume is deleted). The crash suite (test/reliability/flex-crash-anywhere.test.ts) found them
 * left by calls killed mid-write.
 */
export async function writeLockedRecord<T extends Versioned>(path: string, record: T): Promise<void> {
  await removeDeadTemps(path);
  await writeRecord(path, record);
}

/** Removes a record and any temporary file a killed writer left of it; the caller holds its lock. */
export async function removeRecord(path: string): Promise<void> {
  await rm(path, { force: true });
  await removeDeadTemps(path);
}

/** write-file-atomic names its temporary file `<record>.<decimal number>` (node_modules/write-file-atomic/lib/index.js). */
const TEMP_SUFFIX = /^\.\d{1,10}$/;

/** Whether `name` is a temporary file of the record named `record` (both base names). */
export function isRecordTemp(name: string, record: string): boolean {
  return name.startsWith(record) && TEMP_SUFFIX.test(name.slice(record.length));
}

async function removeDeadTemps(path: string): Promise<void> {
  const name = basename(path);
  let names: string[];
  try {
    names = await readdir(dirname(path));
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return;
    throw systemError(err, dirname(path)) ?? err;
  }
  for (const n of names) if (isRecordTemp(n, name)) await rm(join(dirname(path), n), { force: true });
}
