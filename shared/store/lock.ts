import {
  linkSync, lstatSync, mkdir as mkdirCb, mkdirSync, readFileSync, readlinkSync, realpath as realpathCb, realpathSync, renameSync, rmdir as rmdirCb,
  rmdirSync, type Stats, stat as statCb, statSync, symlinkSync, unlinkSync, utimes as utimesCb, utimesSync, writeFileSync,
} from 'node:fs';
import { readFile, stat } from '../fs-async.js';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { aborted, errnoCode, failedPrecondition } from '../errors.js';
import { storeCounts } from './json-record.js';

export interface LockOptions {
  /** How long to wait for a busy lock before giving up with Aborted. */
  waitMs?: number;
}

/**
 * Runs `fn` holding a lock that works across processes (every FlexVolume call is one) and survives a
 * crashed holder: proper-lockfile's lock is a directory whose mtime the holder refreshes. A holder on
 * this host is judged by its pid and start time alone: taken over at once when dead, never while
 * alive, however long it went without refreshing (a process starved of CPU for 10 s is still inside
 * its critical section; taking its lock let two run at once, which the long load suite,
 * test/reliability/load.test.ts, saw as "lock ... was lost during the operation"). A holder on another
 * host, sharing the data root over the network, or one whose owner file is not written yet, is taken
 * over once it has not refreshed for STALE_MS. Taking over is ours (takeOverIfAbandoned), under a guard
 * that lets one waiter at a time judge and remove a lock; proper-lockfile's own staleness rule, which
 * cannot tell the two apart and removes by name, is set out of reach. Loaded on first use, like every heavy module.
 *
 * Taking and releasing a lock is synchronous (proper-lockfile's lockSync: a mkdir; then our owner
 * file; an rmdir to release), as record reads and writes are (shared/store/json-record.ts): a few
 * microseconds each, where the asynchronous forms made ten threadpool round trips per lock. Waiting
 * for a busy lock stays asynchronous.
 */
/** How long a holder on another host may go without refreshing its lock before it is taken over. */
export const STALE_MS = 10_000;
/** proper-lockfile's own rule (its `stale`), out of reach: a day without a refresh. */
const LIBRARY_STALE_MS = 24 * 3600_000;

/**
 * The calls proper-lockfile makes (lib/lockfile.js, lib/mtime-precision.js; lockSync runs the Sync
 * forms). Its default is graceful-fs, a copy of all of node:fs, and lockSync copies whatever it is
 * given with an object spread on every lock: a spread runs the `promises` getter, which loads
 * node:fs/promises (1.9 ms of a FlexVolume call that otherwise never needs it). scripts/build.mjs
 * leaves graceful-fs itself out of the kubelet-facing bundles.
 */
const LOCK_FS = {
  mkdir: mkdirCb, mkdirSync, realpath: realpathCb, realpathSync, rmdir: rmdirCb, rmdirSync, stat: statCb, statSync, utimes: utimesCb, utimesSync,
};

/** The locks this process holds now: a live call of its own is behind each. */
const heldHere = new Set<string>();

/**
 * Whether this process holds the lock now. A caller that would only try the lock to learn whether
 * someone is alive behind it (catalog.sweepAbandoned) needs no try for these: a failed try costs
 * about 0.1 ms of the thread (the library's error, the owner's files read).
 */
export function heldByThisProcess(lockPath: string): boolean {
  return heldHere.has(lockPath);
}

/**
 * proper-lockfile, once loaded. An `await import()` on every lock cost the CSI server 10 to 30 us a
 * lock (its namespace object rebuilt, and microtask turns), measured in a loop of withLock.
 */
let lockfileModule: typeof import('proper-lockfile') | undefined;

export async function withLock<T>(lockPath: string, fn: () => Promise<T>, options: LockOptions = {}): Promise<T> {
  const lockfile = (lockfileModule ??= await import('proper-lockfile'));
  const deadline = Date.now() + (options.waitMs ?? 90_000);
  let compromised: Error | undefined;
  const lockOptions = {
    realpath: false,
    lockfilePath: lockPath,
    fs: LOCK_FS,
    stale: LIBRARY_STALE_MS,
    update: 2_000,
    onCompromised: (err: Error) => {
      compromised = err;
    },
  };
  // Our own wait loop rather than the library's backoff, so that waitMs is the deadline it says.
  let release: () => void;
  let madeDir = false;
  for (;;) {
    try {
      storeCounts.lockTries++;
      release = lockfile.lockSync(lockPath, lockOptions);
      storeCounts.locks++;
      writeOwner(lockPath);
      break;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' && !madeDir) {
        // The locks directory is made by the first lock that needs it (or again, if it was removed).
        mkdirSync(dirname(lockPath), { recursive: true, mode: 0o700 });
        madeDir = true;
        continue;
      }
      if (errnoCode(err) !== 'ELOCKED') throw err;
      // Before the deadline's check: a try with no wait (catalog.sweepAbandoned's) must still take over
      // a dead holder's lock, or what the holder left is never swept.
      if (await takeOverIfAbandoned(lockPath)) continue;
      if (Date.now() >= deadline) throw aborted(`another operation holds ${lockPath}; try again`);
      await sleep(Math.min(20 + Math.random() * 80, Math.max(1, deadline - Date.now())));
    }
  }
  heldHere.add(lockPath);
  try {
    const result = await fn();
    if (compromised) throw aborted(`lock ${lockPath} was lost during the operation: ${compromised.message}`);
    return result;
  } finally {
    heldHere.delete(lockPath);
    ignoreErrors(() => unlinkSync(ownerPath(lockPath)));
    ignoreErrors(release);
  }
}

/** A process that holds something here: a lock (its owner file) or a takeover guard. */
interface Holder {
  pid: number;
  /** The process's start time (/proc/<pid>/stat field 22): a reused pid has another. Empty if it could not read its own. */
  start: string;
  host: string;
}

/** Who holds a lock, beside it (proper-lockfile removes its directory with rmdir: nothing goes inside). */
interface Owner extends Holder {
  /** The lock directory this owner made: a later lock at the same path is another. */
  ino: number;
}

/**
 * Whether this host can tell if `h` is alive: a process of this host that knew its start time. Any
 * other holder, of a lock or of a guard, is judged by how long it has gone without a refresh.
 */
const judgeableHere = (h: Holder | undefined): h is Holder => h !== undefined && h.host === hostname() && h.start !== '';

/** The holder's process is gone: its pid names no process, or one started at another time. */
const goneHere = async (h: Holder): Promise<boolean> => (await startTimeOf(h.pid)) !== h.start;

const ownerPath = (lockPath: string) => `${lockPath}.owner`;

/**
 * Best effort: without an owner file (a full disk, say) the lock still works, and a dead holder's
 * lock is taken over by the time-based rule only. A partial file parses as nothing.
 */
function writeOwner(lockPath: string): void {
  try {
    const owner: Owner = { pid: process.pid, start: ownStartTime() ?? '', host: hostname(), ino: statSync(lockPath).ino };
    writeFileSync(ownerPath(lockPath), JSON.stringify(owner), { mode: 0o600 });
  } catch {
    ignoreErrors(() => unlinkSync(ownerPath(lockPath)));
  }
}

/** Cleanup that must not hide the error or result it runs after. */
function ignoreErrors(fn: () => void): void {
  try {
    fn();
  } catch {
    // Nothing to do: the lock works without its owner file, and a lock left behind is taken over.
  }
}

/** The type each field of an owner file or a guard has. */
type FieldTypes = Record<string, 'number' | 'string'>;
type Parsed<F extends FieldTypes> = { [K in keyof F]: F[K] extends 'number' ? number : string };

/**
 * What an owner file or a guard says: a JSON object with these fields, each of its type, or nothing
 * (a partial owner file, a guard someone else made).
 */
function parseFields<F extends FieldTypes>(text: string, fields: F): Parsed<F> | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const out: Record<string, unknown> = {};
  for (const [name, type] of Object.entries(fields)) {
    const value = (v as Record<string, unknown>)[name];
    if (typeof value !== type) return undefined;
    out[name] = value;
  }
  return out as Parsed<F>;
}

const OWNER_FIELDS = { pid: 'number', start: 'string', host: 'string', ino: 'number' } as const;
const parseOwner = (text: string): Owner | undefined => parseFields(text, OWNER_FIELDS);

let ownStart: string | undefined;
/**
 * This process's start time, read once: every lock a long-running server takes names it. Only a
 * successful read is kept; a failed one is tried again by the next lock.
 */
export function ownStartTime(): string | undefined {
  if (ownStart === undefined) {
    try {
      ownStart = startTimeIn(readFileSync(`/proc/${process.pid}/stat`, 'utf8'));
    } catch {
      // Tried again by the next lock.
    }
  }
  return ownStart;
}

/** Field 22 of /proc/<pid>/stat, counted after the command name (which may hold spaces and parens). */
export async function startTimeOf(pid: number): Promise<string | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return text === undefined ? undefined : startTimeIn(text);
}

function startTimeIn(stat: string): string | undefined {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

/**
 * Whether the lock at `lockPath` is held by nobody alive, by the rules above (a missing lock is not
 * abandoned: nobody holds it). Also what `twinvol status` reports as a stale lock (shared/core/inventory.ts).
 */
export async function isAbandonedLock(lockPath: string): Promise<boolean> {
  return (await lockState(lockPath)) === 'abandoned';
}

/** Whether a lock is free (there is none), held by someone alive, or abandoned, by the rules above. */
export async function lockState(lockPath: string): Promise<'free' | 'held' | 'abandoned'> {
  const st = await stat(lockPath).catch(() => undefined);
  return st ? judge(lockPath, st) : 'free';
}

/**
 * The rules above, for the lock directory `st` describes. Abandoned: its holder on this host is dead
 * (its pid is gone, or now names a process started at another time), or a holder elsewhere, or one
 * that could not read its own start time, has not refreshed it for STALE_MS. (Such a holder's empty
 * start time once read as another process's: a live holder was taken over after a second.) The
 * owner file is trusted only for the lock directory it names (the inode) and once the lock is a
 * second old, so a fresh lock is never judged by the owner file its dead predecessor left.
 */
async function judge(lockPath: string, st: Stats): Promise<'held' | 'abandoned'> {
  const age = Date.now() - st.mtimeMs;
  const owner = parseOwner(await readFile(ownerPath(lockPath), 'utf8').catch(() => ''));
  const dead = owner?.ino === st.ino && judgeableHere(owner) ? age >= 1000 && (await goneHere(owner)) : age >= STALE_MS;
  return dead ? 'abandoned' : 'held';
}

/**
 * Removes an abandoned lock so that the next try takes it; returns whether the lock is gone.
 *
 * A lock removed by name is whatever is at the path by then. Two waiters that judged one dead holder
 * at once each removed "the" lock, and the later removal took away the lock the other had just made:
 * both ran their critical sections together (test/shared/lock.test.ts: four processes taking 30 dead
 * holders' locks together found another inside 13 and 9 times in two runs). So a waiter takes a guard
 * beside the lock first, judges the lock again under it, and removes it then. Nothing else removes a
 * lock its holder did not make, so the lock judged is the lock removed. (A waiter of a version before
 * the guard still removes by name, through proper-lockfile: during an upgrade the two can race.)
 */
async function takeOverIfAbandoned(lockPath: string): Promise<boolean> {
  if ((await lockState(lockPath)) !== 'abandoned') return false;
  const guard = guardPath(lockPath);
  const mine = takeGuard(guard);
  if (mine === undefined) {
    await clearAbandonedGuard(guard);
    return false;
  }
  try {
    const st = await stat(lockPath).catch(() => undefined);
    if (!st) return true;
    if ((await judge(lockPath, st)) !== 'abandoned') return false;
    // The dead holder's owner file first: no other can be there while its lock is.
    ignoreErrors(() => unlinkSync(ownerPath(lockPath)));
    try {
      rmdirSync(lockPath);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
    return true;
  } finally {
    dropGuard(guard, mine);
  }
}

/** Removes this take's guard, and only it. */
function dropGuard(guard: string, mine: string): void {
  ignoreErrors(() => {
    if (readlinkSync(guard) === mine) unlinkSync(guard);
  });
}

/**
 * The guard: a symbolic link whose target says who took it, made in one step with what it says (a
 * lock file written after it is made can be read empty). Its `take` tells this take from any other
 * by the same process.
 */
interface Guard extends Holder {
  take: number;
}

const guardPath = (lockPath: string) => `${lockPath}.takeover`;
let takes = 0;

/** The guard's text if this call took it; undefined if another holds it. */
function takeGuard(guard: string): string | undefined {
  const text = JSON.stringify({ pid: process.pid, start: ownStartTime() ?? '', host: hostname(), take: ++takes } satisfies Guard);
  try {
    symlinkSync(text, guard);
    return text;
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') return undefined;
    throw err;
  }
}

const GUARD_FIELDS = { pid: 'number', start: 'string', host: 'string', take: 'number' } as const;

/**
 * Removes a guard whose taker died during its takeover, by the lock's rules (a dead process on this
 * host; elsewhere, or unreadable, STALE_MS old). It is moved aside first and removed only if it is
 * still the guard judged: a waiter that judged it at the same moment may have removed it and taken
 * one of its own, which then goes back.
 */
async function clearAbandonedGuard(guard: string): Promise<void> {
  let text: string;
  try {
    text = readlinkSync(guard);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return;
    // Not a link (EINVAL): nothing twinvol makes, so nothing it may remove; waiting would not end it.
    throw failedPrecondition(`${guard} is not a takeover guard (${errnoCode(err) ?? String(err)}); remove it to let the lock beside it be taken over`);
  }
  const g: Guard | undefined = parseFields(text, GUARD_FIELDS);
  const dead = judgeableHere(g) ? await goneHere(g) : guardAge(guard) >= STALE_MS;
  if (!dead) return;
  const aside = `${guard}.${process.pid}.${++takes}`;
  try {
    renameSync(guard, aside);
  } catch {
    return;
  }
  if (readlinkSync(aside) !== text) ignoreErrors(() => linkSync(aside, guard));
  unlinkSync(aside);
}

function guardAge(guard: string): number {
  try {
    return Date.now() - lstatSync(guard).mtimeMs;
  } catch {
    return 0;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
