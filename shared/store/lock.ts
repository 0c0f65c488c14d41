import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { aborted, errnoCode } from '../errors.js';

export interface LockOptions {
  /** How long to wait for a busy lock before giving up with Aborted. */
  waitMs?: number;
}

/**
 * Runs `fn` holding a lock that works across processes (every FlexVolume call is one) and survives a
 * crashed holder: proper-lockfile's lock is a directory whose mtime the holder refreshes, so a lock
 * nobody refreshed for `stale` ms is taken over. Loaded on first use, like every heavy module.
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
      break;
    } catch (err) {
      if (errnoCode(err) !== 'ELOCKED') throw err;
      if (Date.now() >= deadline) throw aborted(`another operation holds ${lockPath}; try again`);
      await sleep(Math.min(20 + Math.random() * 80, Math.max(1, deadline - Date.now())));
    }
  }
  try {
    const result = await fn();
    if (compromised) throw aborted(`lock ${lockPath} was lost during the operation: ${compromised.message}`);
    return result;
  } finally {
    await release().catch(() => undefined);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
