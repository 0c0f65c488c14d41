import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A small tmpfs at `path` (made if missing), for a test to fill: a data root or state dir that runs
 * out of space for real. Mount it below a scratch world's root: its cleanup (releaseUnder,
 * test/helpers/scratch.ts) unmounts it whatever the outcome.
 */
export function smallTmpfs(path: string, options: string): void {
  mkdirSync(path, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'twinvol-test-small', path]);
}

/** Bytes a non-root writer could still put on the filesystem holding `dir` (root may use the rest on tmpfs too). */
export function freeBytes(dir: string): number {
  const st = statfsSync(dir);
  return st.bavail * st.bsize;
}

/**
 * Writes a filler file under `dir` until at most `leaveBytes` are free on its filesystem (0: until
 * the kernel answers ENOSPC). Returns the function that frees the space again.
 */
export function fillUp(dir: string, leaveBytes = 0): () => void {
  const filler = join(dir, `filler-${process.pid}-${Date.now()}`);
  const fd = openSync(filler, 'w');
  const big = Buffer.alloc(256 * 1024, 0x5a);
  const page = Buffer.alloc(4096, 0x5a);
  try {
    while (freeBytes(dir) > leaveBytes + big.length) writeSync(fd, big);
    while (freeBytes(dir) > leaveBytes) writeSync(fd, page);
    // tmpfs keeps nothing back for root: "full" is when a write is refused.
    if (leaveBytes === 0) for (;;) writeSync(fd, page);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
  return () => rmSync(filler, { force: true });
}

/**
 * Every regular file below `root` (relative path) with the sha256 of its content, sorted, except
 * paths `skip` matches: compared before and after a call that must leave them as they were.
 */
export function digestsUnder(root: string, skip: RegExp = /^$/): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, rel: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (skip.test(path)) continue;
      if (entry.isDirectory()) walk(join(dir, entry.name), path);
      else if (entry.isFile()) out[path] = createHash('sha256').update(readFileSync(join(dir, entry.name))).digest('hex');
    }
  };
  walk(root, '');
  return out;
}
