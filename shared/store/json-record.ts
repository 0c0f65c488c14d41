import { mkdir, readFile, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import writeFileAtomic from 'write-file-atomic';
import { errnoCode, internal } from '../errors.js';

/** Bumped when a record's shape changes; readers refuse records from a newer version. */
export const SCHEMA_VERSION = 1;

export interface Versioned {
  schema: number;
}

/**
 * Reads one record. A missing file is `undefined`; a file that does not parse is an error naming it,
 * because atomic writes mean it was damaged by something other than twinvol.
 */
export async function readRecord<T extends Versioned>(path: string): Promise<T | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return undefined;
    throw err;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw internal(`state record ${path} is corrupt (not JSON)`);
  }
  if (typeof value !== 'object' || value === null || typeof (value as Versioned).schema !== 'number')
    throw internal(`state record ${path} has no schema version`);
  if ((value as Versioned).schema > SCHEMA_VERSION)
    throw internal(`state record ${path} was written by a newer twinvol (schema ${(value as Versioned).schema})`);
  return value as T;
}

/**
 * Writes a record in one atomic step: a temporary file beside it, fsync, rename. A crash at any point
 * leaves either the old record or the new one, never a mix; write-file-atomic also serialises writers
 * to the same path inside one process and cleans its temporary file on failure.
 */
export async function writeRecord<T extends Versioned>(path: string, record: T): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFileAtomic(path, `${JSON.stringify(record, null, 2)}\n`, { fsync: true, mode: 0o600 });
}

export async function removeRecord(path: string): Promise<void> {
  await rm(path, { force: true });
}
