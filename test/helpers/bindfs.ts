import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';

/**
 * bindfs: a FUSE filesystem that shows one directory at another path. It stands in for a network
 * filesystem under a data root (FUSE is one to twinvol, as GlusterFS's and CephFS's clients are), and
 * unmounting it for a share that went away. scripts/ensure-tools.mjs installs it for the tests.
 */
export const hasBindfs = ['/usr/bin/bindfs', '/usr/local/bin/bindfs'].some((p) => existsSync(p)) && existsSync('/dev/fuse');

/** Mounts `source` at `target` (made if missing); undone by umount or the scratch's releaseUnder. */
export function mountBindfs(source: string, target: string): void {
  mkdirSync(source, { recursive: true });
  mkdirSync(target, { recursive: true });
  execFileSync('bindfs', [source, target], { stdio: 'pipe', timeout: 10_000 });
}

export function unmountBindfs(target: string): void {
  execFileSync('umount', [target], { stdio: 'pipe', timeout: 10_000 });
}
