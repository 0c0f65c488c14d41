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
  const waitMs = options.waitMs ?? 90_000;
  let compromised: Error | undefined;
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(lockPath, {
      realpath: false,
      lockfilePath: lockPath,
      stale: 10_000,
      update: 2_000,
      retries: { retries: Math.ceil(waitMs / 150), minTimeout: 10, maxTimeout: 150, factor: 1.3, randomize: true },
      onCompromised: (err) => {
        compromised = err;
      },
    });
  } catch (err) {
    if (errnoCode(err) === 'ELOCKED') throw aborted(`another operation holds ${lockPath}; try again`);
    throw err;
  }
  try {
    const result = await fn();
    if (compromised) throw aborted(`lock ${lockPath} was lost during the operation: ${compromised.message}`);
    return result;
  } finally {
    await release().catch(() => undefined);
  }
}
