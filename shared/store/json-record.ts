import { close, closeSync, fstat, mkdirSync, open, openSync, read, readdirSync, readFileSync, renameSync, rmSync, type Stats, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { type GenericSchema, safeParse } from 'valibot';
import { errnoCode, internal, systemError } from '../errors.js';
import { fsync } from '../fs-async.js';
import { describeIssues } from './record-schemas.js';

/**
 * Bumped when a record's shape changes; readers refuse records from a newer version (their strict
 * schemas would refuse its new keys anyway, with a less helpful message). 2: volumes keep their name,
 * access requests and topology; snapshots their name; node records. 3: group snapshots, a snapshot's
 * group, and an attachment's inUse and fenced marks. 4: an attachment's implicit mark. 5: a block
 * volume's madeFilesystem. 6: a staging's recordOnly mark. 7: a volume's lifetime. Records of versions 1
 * to 6 parse as they are.
 */
export const SCHEMA_VERSION = 7;

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
  /** Every try at a lock, taken or found busy (shared/store/lock.ts). */
  lockTries: number;
}
export const storeCounts: StoreCounts = { reads: 0, fsyncs: 0, locks: 0, lockTries: 0 };

/**
 * What to do about a record that is not one: it was not half written (writes are atomic), so it was
 * changed by hand, by another program or by damage, and only an operator can tell which.
 */
const REPAIR = 'twinvol writes its records whole, so something else changed this one: restore it from a backup, or move it aside if what it describes is gone';

/*
 * Records are small files on a local disk or a tmpfs, so the store opens, reads, writes, renames and
 * removes them synchronously: each such call costs microseconds, where a round trip through libuv's
 * threadpool cost the CSI server 60 to 100 us of waiting and, under load, more of its main thread's
 * time than the work itself (the profile of 16 lifecycles in flight: a ControllerPublishVolume made
 * about 30 round trips). Only fsync, which waits for the disk, may still leave the thread: through
 * shared/fs-async.ts, which keeps it on the thread in a FlexVolume call, and on the CSI service
 * thread while that serves no other call (other calls' work overlaps the wait).
 */

/**
 * Reads one record and parses it with its schema (shared/store/record-schemas.ts). A missing file is
 * `undefined`; anything else that is not a record of this version is an error naming the file and
 * what is wrong, because atomic writes mean it was changed by something other than this twinvol.
 */
export async function readRecord<T extends Versioned>(path: string, schema: GenericSchema<unknown, T>): Promise<T | undefined> {
  let text: string;
  storeCounts.reads++;
  try {
    text = readFileSync(path, 'utf8');
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
export async function readRecordWithStats<T extends Versioned>(path: string, schema: GenericSchema<unknown, T>): Promise<{ record: T; stats: Stats } | undefined> {
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

function parseRecord<T extends Versioned>(path: string, text: string, schema: GenericSchema<unknown, T>): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw internal(`state record ${path} is corrupt (not JSON); ${REPAIR}`);
  }
  const version = typeof value === 'object' && value !== null && 'schema' in value ? value.schema : undefined;
  if (typeof version !== 'number') throw internal(`state record ${path} has no schema version; ${REPAIR}`);
  if (version > SCHEMA_VERSION) throw internal(`state record ${path} was written by a newer twinvol (schema ${version}); run that version of twinvol, or a newer one, here`);
  const parsed = safeParse(schema, value);
  if (!parsed.success) throw internal(`state record ${path} does not parse: ${describeIssues(parsed.issues)}; ${REPAIR}`);
  return parsed.output;
}

export interface WriteOptions {
  /**
   * false: no fsync, for records on a filesystem that a power loss clears anyway (node state on a
   * tmpfs: shared/store/node-state.ts). The rename keeps the write atomic either way.
   */
  fsync?: boolean;
}

/**
 * Writes a record in one atomic step: a new temporary file beside it (`<record>.<number>`, made
 * with O_EXCL, so two writers never share one), fsync, rename over the record. A crash at any point
 * leaves either the old record or the new one, never a mix; a failure removes the temporary file.
 * A SIGKILL leaves it: `writeLockedRecord` and `removeRecord` sweep it. Writers of one record hold
 * its lock (or, for records nobody shares, write the same content), so the last rename is the newest.
 *
 * Written here rather than with write-file-atomic: its one asynchronous write made about 15 threadpool
 * round trips (a realpath walk of every path component, open, write, fsync, close, chown, chmod,
 * rename), and its synchronous one would hold the thread through the fsync.
 */
export async function writeRecord<T extends Versioned>(path: string, record: T, options: WriteOptions = {}): Promise<void> {
  const sync = options.fsync ?? true;
  const text = `${JSON.stringify(record, null, 2)}\n`;
  let temp: string | undefined;
  try {
    const made = openTemp(path);
    temp = made.temp;
    try {
      writeAll(made.fd, text);
      if (sync) {
        storeCounts.fsyncs++;
        await fsync(made.fd);
      }
    } finally {
      closeSync(made.fd);
    }
    renameSync(temp, path);
  } catch (err) {
    if (temp) rmSync(temp, { force: true });
    throw systemError(err, path) ?? err;
  }
}

/** A new temporary file beside `path`, its directory made if missing (0700, like every store directory). */
function openTemp(path: string): { temp: string; fd: number } {
  for (let attempt = 0; ; attempt++) {
    // At most 10 digits: the form isRecordTemp recognises.
    const temp = `${path}.${Math.floor(Math.random() * 1e10)}`;
    try {
      return { temp, fd: openSync(temp, 'wx', 0o600) };
    } catch (err) {
      const code = errnoCode(err);
      if (code === 'ENOENT' && attempt === 0) mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
      else if (code !== 'EEXIST' || attempt > 8) throw err;
    }
  }
}

function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done);
}

/**
 * Makes the entries of a directory durable (a rename into it, say): fsync of the directory itself.
 * A record's own fsync keeps its content, not its name in a directory a power loss may roll back.
 */
export async function flushDirectory(path: string): Promise<void> {
  const fd = openSync(path, 'r');
  try {
    storeCounts.fsyncs++;
    await fsync(fd);
  } finally {
    closeSync(fd);
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
  try {
    unlinkSync(path);
  } catch (err) {
    if (!isAbsent(err)) throw systemError(err, path) ?? err;
  }
  await removeDeadTemps(path);
}

/** A record's temporary file is `<record>.<decimal number>` (openTemp; write-file-atomic, which wrote them before, named them so too). */
const TEMP_SUFFIX = /^\.\d{1,10}$/;

/** Whether `name` is a temporary file of the record named `record` (both base names). */
export function isRecordTemp(name: string, record: string): boolean {
  return name.startsWith(record) && TEMP_SUFFIX.test(name.slice(record.length));
}

async function removeDeadTemps(path: string): Promise<void> {
  const name = basename(path);
  let names: string[];
  try {
    names = readdirSync(dirname(path));
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return;
    throw systemError(err, dirname(path)) ?? err;
  }
  for (const n of names) if (isRecordTemp(n, name)) rmSync(join(dirname(path), n), { force: true });
}
