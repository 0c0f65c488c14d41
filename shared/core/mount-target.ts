import { close, lstat, mkdir, open, readdir, realpath, rmdir, stat, unlink } from '../fs-async.js';
import { dirname } from 'node:path';
import { errnoCode, failedPrecondition, invalidArgument } from '../errors.js';
import { describeMount } from '../mounter.js';
import { isMountPoint, mountAt, readMounts } from '../mountinfo.js';
import { validatePathUnder } from '../validate.js';
import type { Core } from './core.js';

/**
 * A path the caller gave must stay under its root even after symlinks: "/kubelet/pods/x" that is a
 * link to "/etc" is refused. The nearest existing ancestor is resolved, so paths not made yet work.
 */
export async function checkedPathUnder(path: unknown, root: string, what: string): Promise<string> {
  const valid = validatePathUnder(path, root, what);
  const realRoot = await realpath(root).catch(() => root);
  let probe = valid;
  for (;;) {
    try {
      const resolved = await realpath(probe);
      const rest = valid.slice(probe.length);
      if (!`${resolved}${rest}`.startsWith(`${realRoot}/`)) throw invalidArgument(`${what} ${valid} resolves outside ${root}`);
      return valid;
    } catch (err) {
      if (errnoCode(err) === 'ENOTDIR') throw invalidArgument(`${what} ${valid}: a part of the path that must be a directory is not one`);
      if (errnoCode(err) !== 'ENOENT') throw err;
      // A link to nowhere would be followed by mkdir and mount alike, to wherever it points.
      if (await isSymlink(probe)) throw invalidArgument(`${what} ${valid} passes through a dangling symbolic link`);
      const up = dirname(probe);
      if (up === probe) return valid;
      probe = up;
    }
  }
}

async function isSymlink(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Creates a mount point: a directory, or an empty file for a raw block device. Existing ones are
 * accepted, but not a directory with a mount below it (<kubelet>/pods, say): a mount over it would
 * hide those mounts from their owners and take in whatever is made there next.
 */
export async function makeMountPoint(path: string, kind: 'dir' | 'file'): Promise<void> {
  if (kind === 'dir') {
    await makeDirectory(path, path);
    const st = await lstat(path);
    if (!st.isDirectory()) throw invalidArgument(`${path} exists and is not a directory`);
    // An empty directory (the usual target) has nothing below it to mount over: the mount table is
    // read only for one that holds something. The kernel reports mount points with symlinks resolved.
    if ((await readdir(path)).length === 0) return;
    const real = await realpath(path);
    const below = readMounts().find((m) => m.mountPoint.startsWith(`${real}/`));
    if (below) throw failedPrecondition(`${path} holds a mount below it (${below.mountPoint}): not mounting over it`);
    return;
  }
  await makeDirectory(dirname(path), path);
  // The bind of a device node needs a file under it; a directory (or a device, a socket) is refused
  // by name, not as the INTERNAL that open's EISDIR would have been.
  const st = await lstat(path).catch((err: unknown) => {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  });
  if (st && !st.isFile()) throw invalidArgument(`${path} exists and is not a file: a raw block volume is published onto a file`);
  await close(await open(path, 'a', 0o640));
}

/** mkdir -p, with a file where a directory of the path should be named as such (ENOTDIR, EEXIST), not INTERNAL. */
async function makeDirectory(dir: string, path: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o750 });
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'EEXIST' && dir === path) throw invalidArgument(`${path} exists and is not a directory`);
    if (code === 'ENOTDIR' || code === 'EEXIST') throw invalidArgument(`${path}: a part of the path that must be a directory is not one`);
    throw err;
  }
}

/**
 * Removes a mount point once nothing is mounted on it, if it looks like one: an empty directory, or an
 * empty regular file (a raw block target). Anything else is someone's data or someone's mount, and
 * stays where it is: the answer says what was left and why, for the caller to pass on. Never
 * recursive.
 */
export async function removeMountPoint(path: string): Promise<string | undefined> {
  let st;
  try {
    st = await lstat(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  const foreign = foreignMountAt(path);
  if (foreign) return foreign;
  if (st.isFile() && st.size === 0) {
    await unlink(path).catch((err: unknown) => {
      if (errnoCode(err) !== 'ENOENT') throw err;
    });
    return undefined;
  }
  if (!st.isDirectory()) return `left ${path} alone: ${st.isFile() ? `a file of ${st.size} bytes` : 'neither a directory nor a file'} that twinvol did not make`;
  try {
    await rmdir(path);
    return undefined;
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return undefined;
    if (code === 'ENOTEMPTY' || code === 'EEXIST') return `left ${path} alone: a directory that still holds files`;
    if (code === 'EBUSY') return `left ${path} alone: it is busy`;
    throw err;
  }
}

/** Errors a dead mount answers with: a FUSE daemon gone (ENOTCONN), an NFS handle gone (ESTALE), I/O errors. */
const STALE_CODES = new Set(['ENOTCONN', 'ESTALE', 'EIO']);

export function isStaleError(err: unknown): boolean {
  const code = errnoCode(err);
  return code !== undefined && STALE_CODES.has(code);
}

/**
 * Whether a mount point no longer answers. The mount table still lists a dead mount, so "mounted"
 * is not "usable": a repeated stage or publish must look before it answers that all is done.
 */
export async function isStaleMount(path: string): Promise<boolean> {
  try {
    await stat(path);
    return false;
  } catch (err) {
    return isStaleError(err);
  }
}

/** What a teardown says of a mount it finds at `path` without a record of making it, if there is one. */
export function foreignMountAt(path: string): string | undefined {
  const mounted = mountAt(path);
  return mounted && `left ${path} alone: it holds a mount twinvol did not make, ${describeMount(mounted)}`;
}

/**
 * Unmounts what is mounted at `path` if it no longer answers (a FUSE daemon gone, an NFS handle
 * gone), whoever made it: after a plugin restart that lost its records, such a mount keeps kubelet
 * from cleaning up the pod, and nothing is reachable through it to be lost.
 */
export async function unmountIfDead(core: Core, path: string): Promise<void> {
  if (isMountPoint(path) && (await isStaleMount(path))) await core.mounter.unmountAll(path);
}
