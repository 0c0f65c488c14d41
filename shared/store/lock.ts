import { mkdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { aborted, errnoCode } from '../errors.js';

export interface LockOptions {
  /** How long to wait for a busy lock before giving up with Aborted. */
  waitMs?: number;
}

/**
 * Runs `fn` holding a lock that works across processes (every FlexVolume call is one) and survives a
 * crashed holder: proper-lockfile's lock is a directory whose mtime the holder refreshes, so a lock
 * nobody refreshed for `stale` ms is taken over. A holder on this host that is known dead (its pid is
 * gone, or now names a process started at another time) is taken over without waiting for that
 * (expireIfHolderDead); holders on other hosts, sharing the data root over the network, keep the
 * time-based takeover. Loaded on first use, like every heavy module.
 */
export async function withLock<T>(lockPath: string, fn: () => Promise<T>, options: LockOptions = {}): Promise<T> {
  const lockfile = await import('proper-lockfile');
  await mkdir(dirname(lockPath), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + (options.waitMs ?? 90_000);
  let compromised: Error | undefined;
  const lockOptions = {
    realpath: false,
    lockfilePath: lockPath,
    stale: 10_000,
    update: 2_000,
    onCompromised: (err: Error) => {
      compromised = err;
    },
  };
  // Our own wait loop rather than the library's backoff, so that waitMs is the deadline it says.
  let release: () => Promise<void>;
  for (;;) {
    try {
      release = await lockfile.lock(lockPath, lockOptions);
      await writeOwner(lockPath);
      break;
    } catch (err) {
      if (errnoCode(err) !== 'ELOCKED') throw err;
      if (Date.now() >= deadline) throw aborted(`another operation holds ${lockPath}; try again`);
      if (await expireIfHolderDead(lockPath, lockOptions.stale)) continue;
      await sleep(Math.min(20 + Math.random() * 80, Math.max(1, deadline - Date.now())));
    }
  }
  try {
    const result = await fn();
    if (compromised) throw aborted(`lock ${lockPath} was lost during the operation: ${compromised.message}`);
    return result;
  } finally {
    await rm(ownerPath(lockPath), { force: true }).catch(() => undefined);
    await release().catch(() => undefined);
  }
}

/** Who holds a lock, beside it (proper-lockfile removes its directory with rmdir: nothing goes inside). */
interface Owner {
  pid: number;
  /** The process's start time (/proc/<pid>/stat field 22): a reused pid has another. */
  start: string;
  host: string;
  /** The lock directory this owner made: a later lock at the same path is another. */
  ino: number;
}

const ownerPath = (lockPath: string) => `${lockPath}.owner`;

/**
 * Best effort: without an owner file (a full disk, say) the lock still works, and a dead holder's
 * lock is taken over by the time-based rule only. A partial file parses as nothing.
 */
async function writeOwner(lockPath: string): Promise<void> {
  try {
    const owner: Owner = { pid: process.pid, start: (await startTimeOf(process.pid)) ?? '', host: hostname(), ino: (await stat(lockPath)).ino };
    await writeFile(ownerPath(lockPath), JSON.stringify(owner), { mode: 0o600 });
  } catch {
    await rm(ownerPath(lockPath), { force: true }).catch(() => undefined);
  }
}

function parseOwner(text: string): Owner | undefined {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v !== 'object' || v === null) return undefined;
    const { pid, start, host, ino } = v as Record<string, unknown>;
    if (typeof pid !== 'number' || typeof start !== 'string' || typeof host !== 'string' || typeof ino !== 'number') return undefined;
    return { pid, start, host, ino };
  } catch {
    return undefined;
  }
}

/** Field 22 of /proc/<pid>/stat, counted after the command name (which may hold spaces and parens). */
async function startTimeOf(pid: number): Promise<string | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return text?.slice(text.lastIndexOf(')') + 2).split(' ')[19];
}

/**
 * Makes a lock whose holder is known dead look stale, so that the next attempt takes it over at once.
 * Only a lock at least a second old is touched: its holder has had that long to write its owner file,
 * so a fresh lock is never judged by the owner file its dead predecessor left (the directory's inode
 * is compared as well). Returns whether it did.
 */
async function expireIfHolderDead(lockPath: string, staleMs: number): Promise<boolean> {
  const owner = parseOwner(await readFile(ownerPath(lockPath), 'utf8').catch(() => ''));
  if (!owner || owner.host !== hostname()) return false;
  const st = await stat(lockPath).catch(() => undefined);
  if (!st || st.ino !== owner.ino || Date.now() - st.mtimeMs < 1000) return false;
  if ((await startTimeOf(owner.pid)) === owner.start) return false;
  const old = new Date(Date.now() - 2 * staleMs);
  await utimes(lockPath, old, old).catch(() => undefined);
  return true;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
