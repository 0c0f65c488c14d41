import { statfs } from '../fs-async.js';
import { errnoCode } from '../errors.js';

/**
 * When a listing of a directory may be kept while a stat of it (inode, link count, mtime, ctime)
 * stays the same: the catalog's sorted listing of volumes/ (shared/store/catalog.ts listVolumeIds). A
 * change made within the same timestamp tick as the last one leaves the same mtime and ctime behind,
 * so a listing is kept only once the directory has been still for longer than one tick: any later
 * change then stamps a later time.
 *
 * How long a tick is depends on the filesystem. ext4 (with its usual 256-byte inodes), xfs, btrfs
 * and tmpfs stamp nanoseconds from the kernel's coarse clock, which moves once a scheduler tick (at
 * most 10 ms, at HZ=100); kernels from 6.13 stamp a finer time when the last one was looked at. A
 * filesystem that keeps whole seconds (ext4 made with 128-byte inodes, FAT's two) stamps times with
 * no fraction of a second. And on a network filesystem the server's clock stamps the times, which
 * may be behind this host's by more than a tick. So: FINE_SETTLED_MS on a local filesystem whose
 * times show a fraction of a second, COARSE_SETTLED_MS otherwise. At 10,000 volumes a listing read
 * anew costs a readdir of about 5 ms, so a server asked to list right after volumes were made (a
 * pager, the external-attacher's resync) reads it again for FINE_SETTLED_MS, not for two seconds.
 */
export const FINE_SETTLED_MS = 100;
export const COARSE_SETTLED_MS = 2_000;

/** statfs(2) f_type values (linux/magic.h). */
const TMPFS_MAGIC = 0x01021994;
const RAMFS_MAGIC = 0x858458f6;
const EXT4_MAGIC = 0xef53; // ext2, ext3 and ext4 alike
const XFS_MAGIC = 0x58465342;
const BTRFS_MAGIC = 0x9123683e;
const OVERLAYFS_MAGIC = 0x794c7630; // a container's own filesystem, over a local one
const F2FS_MAGIC = 0xf2f52010;
const ZFS_MAGIC = 0x2fc12fc1;

const LOCAL_FILESYSTEMS: ReadonlySet<number> = new Set([EXT4_MAGIC, XFS_MAGIC, BTRFS_MAGIC, TMPFS_MAGIC, RAMFS_MAGIC, OVERLAYFS_MAGIC, F2FS_MAGIC, ZFS_MAGIC]);

/** Filesystems whose content a reboot clears, as it clears the mounts node state describes. */
const VOLATILE_FILESYSTEMS: ReadonlySet<number> = new Set([TMPFS_MAGIC, RAMFS_MAGIC]);

/**
 * Whether `path` lies on a filesystem of one of `types` (statfs): undefined while the path does not
 * exist (ask again later), false for any other failure.
 */
async function filesystemAmong(path: string, types: ReadonlySet<number>): Promise<boolean | undefined> {
  try {
    return types.has((await statfs(path)).type);
  } catch (err) {
    return errnoCode(err) === 'ENOENT' ? undefined : false;
  }
}

/** Whether `path` is on a filesystem of this host whose times this host's clock stamps (filesystemAmong). */
export const isLocalFilesystem = (path: string): Promise<boolean | undefined> => filesystemAmong(path, LOCAL_FILESYSTEMS);

/**
 * What a data root that must lie on a network filesystem (setting dataRootOnNetwork) lies on, when
 * that is not so: "a local filesystem (ext4)", "nothing: it does not exist". undefined when it does.
 * Only the local filesystems above count against it, so a cluster filesystem on a shared block
 * device (ocfs2, gfs2) passes with NFS, SMB, CephFS and FUSE.
 */
export async function notOnNetwork(path: string): Promise<string | undefined> {
  let type: number;
  try {
    type = (await statfs(path)).type;
  } catch (err) {
    return errnoCode(err) === 'ENOENT' ? 'nothing: it does not exist' : `a filesystem statfs cannot read (${errnoCode(err) ?? String(err)})`;
  }
  return LOCAL_FILESYSTEMS.has(type) ? `a local filesystem (statfs type 0x${type.toString(16)})` : undefined;
}

/** Whether `path` is on a tmpfs or a ramfs, where an fsync keeps nothing a reboot would not clear (filesystemAmong). */
export const isVolatileFilesystem = (path: string): Promise<boolean | undefined> => filesystemAmong(path, VOLATILE_FILESYSTEMS);

/** Whether a time in milliseconds (as node:fs gives mtimeMs) has a fraction of a second. */
function hasSubsecond(ms: number): boolean {
  return ms % 1000 !== 0;
}

/** The settle window for a path with these times (see above). */
export function settleWindowMs(local: boolean, mtimeMs: number, ctimeMs: number): number {
  return local && hasSubsecond(mtimeMs) && hasSubsecond(ctimeMs) ? FINE_SETTLED_MS : COARSE_SETTLED_MS;
}

/** Whether a path last changed at these times has been still long enough to keep what was read of it. */
export function hasSettled(local: boolean, mtimeMs: number, ctimeMs: number, now = Date.now()): boolean {
  const before = now - settleWindowMs(local, mtimeMs, ctimeMs);
  return mtimeMs < before && ctimeMs < before;
}

/**
 * Milliseconds of a bigint stat's nanoseconds with their fraction (BigIntStats.mtimeMs drops it), as
 * precise as node:fs's own mtimeMs: a double holds today's times to about a quarter of a microsecond,
 * so a time a few nanoseconds past a whole second reads as whole (and gets the long window).
 */
export function nsToMs(ns: bigint): number {
  return Number(ns / 1_000_000n) + Number(ns % 1_000_000n) / 1e6;
}
