import { constants } from 'node:fs';
import { close, open, readFile, readlink, realpath } from './fs-async.js';
import { errnoCode, invalidArgument } from './errors.js';

/** Where a mount goes: a path the caller checked, and the root the mount must land under. */
export interface MountTarget {
  path: string;
  within: string;
}

/** An open file: its descriptor, and the one way to close it. */
export interface OpenFile {
  fd: number;
  close(): Promise<void>;
}

/** A mount point held open: the mount is made onto this very object, whatever its path turns into. */
export interface PinnedTarget {
  handle: OpenFile;
  /** Where the object is, as the kernel names it when it was pinned. */
  real: string;
  /** The kernel's id of the mount the object lies on (the parent of the mount about to be made). */
  mountId: number;
}

/** The fd number a child sees the pinned object under (runner.ts passes it as the fourth stdio slot). */
export const CHILD_FD = 3;
export const CHILD_FD_PATH = `/proc/self/fd/${CHILD_FD}`;

/**
 * Opens a mount point without following a final symlink and checks where the kernel says the opened
 * object is. Checking a path and then mounting onto the same path let a target swapped for a symlink in
 * between land the mount outside the kubelet dir (issue 8, defect 4); mounting onto the open object
 * (`mount --no-canonicalize ... /proc/self/fd/3`) makes the check and the mount refer to the same thing.
 */
export async function pinTarget(target: MountTarget): Promise<PinnedTarget> {
  let handle: OpenFile;
  try {
    const fd = await open(target.path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    handle = { fd, close: () => close(fd) };
  } catch (err) {
    if (errnoCode(err) === 'ELOOP') throw invalidArgument(`mount point ${target.path} is a symbolic link`);
    throw err;
  }
  try {
    const real = await whereIs(handle);
    await requireWithin(real, target);
    return { handle, real, mountId: await mountIdOf(handle) };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** An open object as this process names it: a path the kernel resolves to that very object. */
export const fdPath = (handle: OpenFile): string => `/proc/self/fd/${handle.fd}`;

/** The path the kernel gives an open object now (it follows renames). */
export const whereIs = (handle: OpenFile): Promise<string> => readlink(fdPath(handle));

export async function requireWithin(real: string, target: MountTarget): Promise<void> {
  const root = await realpath(target.within).catch(() => target.within);
  if (!real.startsWith(`${root}/`)) throw invalidArgument(`mount point ${target.path} is ${real.slice(0, 256)}, outside ${target.within}`);
}

/** The id of the mount an open object lies on, from /proc/self/fdinfo. */
export async function mountIdOf(handle: OpenFile): Promise<number> {
  const m = /^mnt_id:\s*(\d+)$/m.exec(await readFile(`/proc/self/fdinfo/${handle.fd}`, 'utf8'));
  if (!m?.[1]) throw new Error(`no mnt_id in /proc/self/fdinfo/${handle.fd}`);
  return Number(m[1]);
}
