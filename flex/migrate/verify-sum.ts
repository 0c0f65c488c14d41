import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * What `twinvol migrate verify` compares between the two plugin models: a volume's file tree as a pod
 * sees it, and for a volume with a device of its own the device's bytes. Nothing here follows a
 * symlink or crosses into another mount: the tree is the volume's, however it was brought up.
 */

/** One entry of a file tree: everything a pod could tell apart, times excepted (reading changes atime). */
export interface TreeEntry {
  /** Relative to the volume's root; "." for the root itself. */
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'fifo' | 'socket' | 'char' | 'block';
  /** Permission bits with setuid, setgid and sticky (mode & 0o7777). */
  mode: number;
  uid: number;
  gid: number;
  /** Files: the size in bytes; others 0. */
  size: number;
  /** Files: sha256 of the content; symlinks: the target; others "". */
  content: string;
  /** Device nodes: the device they open, "major:minor"; others "". */
  rdev: string;
}

export interface TreeSum {
  /** sha256 over every entry's line, in path order. */
  digest: string;
  entries: number;
  bytes: number;
  /** Kept to name what differs when two sums disagree. */
  list: TreeEntry[];
}

export interface DeviceSum {
  device: string;
  digest: string;
  bytes: number;
}

/** The checksum of what one model showed: the tree, and the device when the volume has one. */
export interface VolumeSum {
  tree: TreeSum;
  device?: DeviceSum;
}

export async function treeSum(root: string): Promise<TreeSum> {
  const rootDev = (await lstat(root)).dev;
  const list: TreeEntry[] = [];
  const walk = async (rel: string): Promise<void> => {
    const abs = rel === '.' ? root : join(root, rel);
    const st = await lstat(abs);
    const base = { path: rel, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid, rdev: '' };
    if (st.isSymbolicLink()) list.push({ ...base, type: 'symlink', size: 0, content: await readlink(abs) });
    else if (st.isFile()) list.push({ ...base, type: 'file', size: st.size, content: await fileDigest(abs) });
    else if (st.isDirectory()) {
      list.push({ ...base, type: 'dir', size: 0, content: '' });
      // A mount inside the volume (none is expected) is another filesystem's content: not walked.
      if (st.dev !== rootDev) return;
      const names = (await readdir(abs)).sort();
      for (const name of names) await walk(rel === '.' ? name : `${rel}/${name}`);
    } else if (st.isCharacterDevice() || st.isBlockDevice()) {
      // Same type and mode, another device: a pod opening it reads something else entirely.
      list.push({ ...base, type: st.isCharacterDevice() ? 'char' : 'block', size: 0, content: '', rdev: deviceNumbers((await lstat(abs, { bigint: true })).rdev) });
    } else list.push({ ...base, type: st.isFIFO() ? 'fifo' : 'socket', size: 0, content: '' });
  };
  await walk('.');
  list.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const hash = createHash('sha256');
  for (const e of list) hash.update(`${entryLine(e)}\n`);
  return { digest: hash.digest('hex'), entries: list.length, bytes: list.reduce((n, e) => n + e.size, 0), list };
}

export async function deviceSum(device: string): Promise<DeviceSum> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(device, { highWaterMark: 4 * 2 ** 20 })) {
    const b = chunk as Buffer;
    bytes += b.length;
    hash.update(b);
  }
  return { device, digest: hash.digest('hex'), bytes };
}

function fileDigest(path: string): Promise<string> {
  return new Promise((done, fail) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('data', (d) => hash.update(d))
      .on('error', fail)
      .on('end', () => done(hash.digest('hex')));
  });
}

function entryLine(e: TreeEntry): string {
  return [e.path, e.type, e.mode.toString(8).padStart(4, '0'), e.uid, e.gid, e.size, e.content, e.rdev].join('\t');
}

/** glibc's dev_t split (sys/sysmacros.h major, minor), in bigint: a 64-bit dev_t does not fit JS's 32-bit shifts. */
export function deviceNumbers(rdev: bigint): string {
  const major = ((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn);
  const minor = (rdev & 0xffn) | ((rdev >> 12n) & ~0xffn);
  return `${major}:${minor}`;
}

/** What differs between two sums, at most `limit` lines (empty: the same). */
export function differences(a: VolumeSum, b: VolumeSum, limit = 10): string[] {
  const out: string[] = [];
  if (a.tree.digest !== b.tree.digest) {
    const left = new Map(a.tree.list.map((e) => [e.path, e]));
    const right = new Map(b.tree.list.map((e) => [e.path, e]));
    for (const path of [...new Set([...left.keys(), ...right.keys()])].sort()) {
      const x = left.get(path);
      const y = right.get(path);
      if (!x) out.push(`${path}: only in the second`);
      else if (!y) out.push(`${path}: only in the first`);
      else {
        const what = (['type', 'mode', 'uid', 'gid', 'size', 'content', 'rdev'] as const).filter((k) => x[k] !== y[k]);
        if (what.length) out.push(`${path}: ${what.map((k) => `${k} ${show(k, x[k])} -> ${show(k, y[k])}`).join(', ')}`);
      }
    }
    if (!out.length) out.push('file trees differ');
  }
  if (a.device && b.device && a.device.digest !== b.device.digest)
    out.push(`device bytes differ: sha256 ${a.device.digest.slice(0, 16)} (${a.device.bytes} bytes) -> ${b.device.digest.slice(0, 16)} (${b.device.bytes} bytes)`);
  return out.length > limit ? [...out.slice(0, limit), `... and ${out.length - limit} more`] : out;
}

function show(key: keyof TreeEntry, value: string | number): string {
  if (key === 'mode' && typeof value === 'number') return value.toString(8).padStart(4, '0');
  if (key === 'content' && typeof value === 'string' && /^[0-9a-f]{64}$/.test(value)) return value.slice(0, 12);
  return JSON.stringify(value);
}

/** One line for the report: short digests and counts. */
export function describeSum(s: VolumeSum): string {
  const tree = `tree ${s.tree.digest.slice(0, 16)} (${s.tree.entries} entries, ${s.tree.bytes} bytes)`;
  return s.device ? `${tree}; device ${s.device.digest.slice(0, 16)} (${s.device.bytes} bytes)` : tree;
}
