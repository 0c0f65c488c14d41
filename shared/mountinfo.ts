import { readFileSync, realpathSync } from 'node:fs';
import { readFile } from './fs-async.js';
import { errnoCode } from './errors.js';
import { type MountIds, type NativeMount, nativeMount } from './native-mount.js';

/** One line of /proc/self/mountinfo, the kernel's own account of what is mounted where. */
export interface MountEntry {
  id: number;
  parentId: number;
  /** "major:minor" of the mounted filesystem. */
  device: string;
  /** Path inside the source filesystem that is mounted here (not "/" for bind mounts of a subtree). */
  root: string;
  mountPoint: string;
  mountOptions: string[];
  fsType: string;
  source: string;
  superOptions: string[];
  /**
   * Its propagation, as the optional fields say it (shared:N, master:N, propagate_from:N,
   * unbindable): none is a private mount.
   */
  propagation: string[];
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescape(field: string): string {
  // Nearly every field has no escape: the regular expression is skipped (a busy CSI server reads
  // the table several times per call).
  if (!field.includes('\\')) return field;
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const fields = line.split(' ');
    const sep = fields.indexOf('-', 6);
    if (sep < 0 || fields.length < sep + 3) continue;
    entries.push({
      id: Number(fields[0]),
      parentId: Number(fields[1]),
      device: fields[2] ?? '',
      root: unescape(fields[3] ?? ''),
      mountPoint: unescape(fields[4] ?? ''),
      mountOptions: (fields[5] ?? '').split(','),
      fsType: fields[sep + 1] ?? '',
      source: unescape(fields[sep + 2] ?? ''),
      superOptions: (fields[sep + 3] ?? '').split(','),
      propagation: fields.slice(6, sep),
    });
  }
  return entries;
}

export function readMounts(): MountEntry[] {
  return parseMountInfo(readMountInfo());
}

const MOUNTINFO = '/proc/self/mountinfo';

/**
 * Reads of the kernel's mount table by this process, which the counts tests assert per call
 * (test/perf/counts.test.ts): the kernel writes the whole table out for each, about 1.25 ms on a
 * node with 1,000 mounts (docs/benchmarks.md), however little of it the caller wants.
 */
export const mountTableCounts = { reads: 0 };

function readMountInfo(): string {
  mountTableCounts.reads++;
  return readFileSync(MOUNTINFO, 'utf8');
}

/** The addon, for a question only: a bad TWINVOL_NATIVE_MOUNT is refused by the call that mounts (shared/mounter.ts), not here. */
function addonToAsk(): NativeMount | undefined {
  try {
    return nativeMount();
  } catch {
    return undefined;
  }
}

/**
 * Whether `path` is a mount's root, asked of the kernel for that path alone (statx through the mount
 * addon, shared/native-mount.ts) rather than by reading the whole table; undefined where it cannot
 * say, and the table answers. Only for a path that is its own real path: the table names mount
 * points by their real paths, so a path through a symlink, which the table never holds, is left to
 * it and keeps its answer. A path that does not exist has nothing mounted on it. Any other failure
 * (no addon, TWINVOL_NATIVE_MOUNT=off or invalid, a kernel before 5.8) leaves it to the table too.
 */
function kernelSaysMountRoot(path: string): boolean | undefined {
  const native = addonToAsk();
  if (!native) return undefined;
  try {
    if (realpathSync.native(path) !== path) return undefined;
  } catch (err) {
    // Nothing is mounted where no path leads (a publish's target before it is made, say); any
    // other failure (a stale network mount's ESTALE, a dead FUSE daemon's ENOTCONN) is the table's.
    return errnoCode(err) === 'ENOENT' ? false : undefined;
  }
  return native.mountRoot(path);
}

/**
 * The mount on top at `path`, with the ids and mount point the table gives it, asked of the kernel
 * for that one mount (statx and statmount, Linux 6.8) without reading the table; undefined when
 * nothing is mounted at `path`, or when the kernel cannot say, and then the caller reads the table.
 * statmount names the mount point as the table does (symlinks resolved), so a path through a
 * symlink finds a mount point that differs, and is left to the table like one with nothing.
 */
export function topMountAt(path: string): MountIds | undefined {
  const top = addonToAsk()?.topMount(path);
  return top?.mountPoint === path ? top : undefined;
}

/**
 * Whether something is mounted at `path`: mountAt(path) !== undefined, without reading the table when
 * the kernel can say for the one path (kernelSaysMountRoot). The one difference: a mount hidden by a
 * later mount over a directory above it is still in the table, but no longer at the path.
 */
export function isMountPoint(path: string): boolean {
  return kernelSaysMountRoot(path) ?? mountsStackedAt(path).length > 0;
}

/**
 * The mount visible at `path` (the last one stacked there), if any: looked up in `mounts`, or in the
 * kernel's table read now, once the kernel has not said for the one path that nothing is mounted
 * there (kernelSaysMountRoot).
 */
export function mountAt(path: string, mounts?: readonly MountEntry[]): MountEntry | undefined {
  if (!mounts) return kernelSaysMountRoot(path) === false ? undefined : mountsStackedAt(path).at(-1);
  for (let i = mounts.length - 1; i >= 0; i--) if (mounts[i]?.mountPoint === path) return mounts[i];
  return undefined;
}

/**
 * isMountPoint, with the table, when it must be read, read on libuv's threadpool. Reading the table
 * waits for the kernel while a mount or unmount is in progress on the node; right after an umount
 * that wait was long enough to matter: under 16 lifecycles in flight, unmountAll's reads were 280 ms
 * of the CSI server's 7.3 s of busy main thread (3.8%), one of them 15 ms in a single task, while the
 * other look-ups together took 250 ms. statx walks the one path and takes no such wait. For a caller
 * that has other work to wait for, such as a server's next request.
 */
export async function isMountPointAsync(path: string): Promise<boolean> {
  return kernelSaysMountRoot(path) ?? (await stackedAtAsync(path)).length > 0;
}

async function stackedAtAsync(path: string): Promise<MountEntry[]> {
  mountTableCounts.reads++;
  return mountsStackedAt(path, await readFile(MOUNTINFO, 'utf8'));
}

/**
 * Every mount at `path`, bottom first, from the kernel's table read now (or `text`, a table's
 * text). Only a line that holds the path as the kernel writes it (escaped, between spaces) is
 * parsed, and its mount point is still compared whole: most reads of the table are about one path,
 * and parsing every line of a busy node's table was 2.9% of the CSI server's main thread under 16
 * lifecycles in flight (shared/mountinfo.ts in a CPU profile).
 */
export function mountsStackedAt(path: string, text: string = readMountInfo()): MountEntry[] {
  const needle = ` ${escapeField(path)} `;
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes(needle)) continue;
    const [entry] = parseMountInfo(line);
    if (entry?.mountPoint === path) out.push(entry);
  }
  return out;
}

/** The kernel's escaping of a mountinfo field (the inverse of unescape). */
function escapeField(value: string): string {
  return value.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
}

export function isReadOnly(entry: MountEntry): boolean {
  return entry.mountOptions.includes('ro');
}
