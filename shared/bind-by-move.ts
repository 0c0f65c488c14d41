import { readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { failedPrecondition } from './errors.js';
import { fstat, lstat, mkdir, readdir, realpath, rmdir, unlink, writeFile } from './fs-async.js';
import { mountsStackedAt } from './mountinfo.js';
import { callNatively, type MountIds, nativeMount } from './native-mount.js';
import { CHILD_FD_PATH, fdPath, type MountTarget, type PinnedTarget, pinTarget } from './pinned-target.js';
import { ownStartTime, startTimeOf, withLock } from './store/lock.js';

/**
 * A bind with flags (a read-only publish) where the addon cannot make it in one step (native/bind.c:
 * no addon, an older one, a kernel before 5.12, an option that is no mount flag): bound and remounted
 * on a scratch mount point of its own, under a private mount nobody else sees, then moved, finished,
 * onto the pinned target (MS_MOVE). Made on the target itself, the two steps had two faults:
 * - a process killed between them left the target mounted read-write, and kubelet never repeats a
 *   FlexVolume mount on a path that is already a mount point;
 * - a remount's flags never reach the peers of a shared mount (a CSI node plugin's Bidirectional
 *   kubelet dir, deploy/node.yaml), so the host's copy of a read-only publish was writable.
 * A move into a shared parent propagates the mount as it is, flags and all (the kernel's clone_mnt
 * copies them), and a kill before the move leaves nothing on the target. What a kill leaves on the
 * scratch side is undone by the next such bind, or a CSI server's start (sweepScratchBinds), once its
 * process is gone; docs/architecture.md ("Read-only binds") says what is left where.
 */

/** Under the state dir: the private mount, holding one scratch mount point per bind in progress. */
export const SCRATCH_BINDS = 'binds';

/** Mounter's own steps (shared/mounter.ts), so a scratch bind is made and checked as every other. */
export interface BindSteps {
  /** Binds `source` onto the pinned object and remounts it with `options`, undone if the remount fails. */
  bindThenRemount(source: string, pinned: PinnedTarget, target: MountTarget, options: readonly string[]): Promise<MountIds>;
  /** The new mount on the pinned object, within its root, or it is undone (Mounter.requireLanded). */
  requireLanded(pinned: PinnedTarget, target: MountTarget): Promise<MountIds>;
  /** mount(8) through the runner, `fd3` its fd 3. */
  mountTool(args: readonly string[], fd3?: number): Promise<void>;
  unmountAll(path: string): Promise<void>;
}

/** Who made a scratch mount point, as its name says: `<pid namespace>.<pid>.<start time>.<sequence>`. */
interface ScratchOwner {
  pidNamespace: string;
  pid: number;
  start: string;
}

let sequence = 0;
let ownNamespace: string | undefined;

/**
 * This process's pid namespace (the inode /proc/self/ns/pid names): a pid means something only in
 * its own. A CSI container and the host's FlexVolume calls share the state dir, and each judges only
 * the scratch points of its own namespace; removing another's directory would detach its mount in flight.
 */
function pidNamespace(): string {
  return (ownNamespace ??= /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '0');
}

function scratchName(): string {
  return `${pidNamespace()}.${process.pid}.${ownStartTime() ?? '0'}.${++sequence}`;
}

function scratchOwner(name: string): ScratchOwner | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)\.\d+$/.exec(name);
  return m?.[1] && m[2] && m[3] ? { pidNamespace: m[1], pid: Number(m[2]), start: m[3] } : undefined;
}

/**
 * Whether the process that made the scratch point `name` is gone: true only for a name of this pid
 * namespace whose pid names no process, or one started at another time (a reused pid).
 */
export async function scratchOwnerGone(name: string): Promise<boolean> {
  const owner = scratchOwner(name);
  if (!owner || owner.pidNamespace !== pidNamespace()) return false;
  return (await startTimeOf(owner.pid)) !== owner.start;
}

/**
 * Binds `source` onto the pinned target with `options` through a scratch mount point under
 * `<stateDir>/binds`, as the top of this file says. Whatever fails, the scratch point is undone: the
 * finished bind unmounted, its directory removed.
 */
export async function bindByMove(steps: BindSteps, stateDir: string, source: string, pinned: PinnedTarget, target: MountTarget, options: readonly string[]): Promise<void> {
  const dir = await privateParent(steps, stateDir);
  await sweepIn(steps, dir);
  // A unique name per call: several FlexVolume calls and a CSI server may bind at once on one node.
  const scratch = { path: join(dir, scratchName()), within: dir };
  // A bind joins two objects of one kind: a raw block publish binds a device onto a file, so its
  // scratch point is a file too (a directory answered ENOTDIR), as the pinned target is.
  const onDirectory = (await fstat(pinned.handle.fd)).isDirectory();
  if (onDirectory) await mkdir(scratch.path, { mode: 0o700 });
  else await writeFile(scratch.path, '', { mode: 0o600, flag: 'wx' });
  try {
    const point = await pinTarget(scratch);
    let made: MountIds;
    try {
      made = await steps.bindThenRemount(source, point, scratch, options);
    } finally {
      await point.handle.close();
    }
    await move(steps, made, scratch, pinned, target);
    await steps.requireLanded(pinned, target);
  } finally {
    // After the move nothing is mounted there (statx says so, no table read); after a failure, the finished bind is.
    await steps.unmountAll(scratch.path).catch(() => undefined);
    await removePoint(scratch.path).catch(() => undefined);
  }
}

/**
 * MS_MOVE of the scratch bind onto the pinned target: by the addon where it exports MS_MOVE, from the
 * bind's root opened again (it must still be the mount just made), else by mount(8) --move, the
 * target as its fd 3. The scratch point's path is safe to name: it lies in a directory only root can
 * write, under the state dir, which is twinvol's own.
 */
async function move(steps: BindSteps, made: MountIds, scratch: MountTarget, pinned: PinnedTarget, target: MountTarget): Promise<void> {
  const native = nativeMount();
  const MS_MOVE = native?.MS_MOVE;
  if (native && MS_MOVE) {
    const root = await pinTarget(scratch);
    try {
      if (root.mountId !== made.id) throw failedPrecondition(`the bind made at ${scratch.path} for ${target.path} was replaced before it was moved`);
      const what = { call: 'mount', source: scratch.path, target: target.path, options: ['move'] } as const;
      if (callNatively(what, () => native.mount(fdPath(root.handle), fdPath(pinned.handle), null, MS_MOVE, null))) return;
    } finally {
      await root.handle.close();
    }
  }
  await steps.mountTool(['--no-canonicalize', '--move', '--', scratch.path, CHILD_FD_PATH], pinned.handle.fd);
}

/**
 * `<stateDir>/binds`, made a private mount of itself in this mount namespace (MS_MOVE refuses to
 * move a mount whose parent is shared, and a private parent sends nothing to, and takes nothing
 * from, any peer): its real path. Made once, under a lock, so that two first calls at once do not
 * stack two; each mount namespace (the host's, a CSI container's) makes its own copy private.
 */
async function privateParent(steps: BindSteps, stateDir: string): Promise<string> {
  const dir = join(stateDir, SCRATCH_BINDS);
  const ready = async () => {
    const real = await realpath(dir).catch(() => undefined);
    const top = real === undefined ? undefined : mountsStackedAt(real).at(-1);
    return { real, top, isPrivate: top !== undefined && !top.propagation.some((p) => /^(shared|master):/.test(p)) };
  };
  const now = await ready();
  if (now.real !== undefined && now.isPrivate) return now.real;
  // '@' begins no volume id (shared/validate.ts), so this is never a volume's node lock, which the caller may hold.
  return withLock(join(stateDir, 'locks', '@binds.lock'), async () => {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const { real, top, isPrivate } = await ready();
    if (real === undefined) throw failedPrecondition(`${dir} cannot be resolved`);
    if (isPrivate) return real;
    // A bind of a directory in a shared mount is shared in turn: made private either way.
    if (!top) await selfBind(steps, real);
    await makePrivate(steps, real);
    return real;
  });
}

function selfBind(steps: BindSteps, dir: string): Promise<void> | void {
  const native = nativeMount();
  const what = { call: 'mount', source: dir, target: dir, options: ['bind'] } as const;
  if (native && callNatively(what, () => native.mount(dir, dir, null, native.MS_BIND, null))) return;
  return steps.mountTool(['--no-canonicalize', '--bind', '--', dir, dir]);
}

function makePrivate(steps: BindSteps, dir: string): Promise<void> | void {
  const native = nativeMount();
  const MS_PRIVATE = native?.MS_PRIVATE;
  const what = { call: 'mount', target: dir, options: ['make-private'] } as const;
  if (native && MS_PRIVATE && callNatively(what, () => native.mount(null, dir, null, MS_PRIVATE, null))) return;
  return steps.mountTool(['--no-canonicalize', '--make-private', '--', dir]);
}

/**
 * Undoes the scratch points whose process is gone (killed between its bind and its move, or before
 * it removed the directory): each unmounted, then removed. One another caller undoes first is
 * skipped. Answers the paths it undid. `dir` is the real path of `<stateDir>/binds`.
 */
async function sweepIn(steps: BindSteps, dir: string): Promise<string[]> {
  const undone: string[] = [];
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!(await scratchOwnerGone(name))) continue;
    const path = join(dir, name);
    try {
      await steps.unmountAll(path);
      await removePoint(path);
      undone.push(path);
    } catch {
      // Another sweeper took it first, or it is left for the next one (and `twinvol status` names it).
    }
  }
  return undone;
}

/** A scratch mount point, a directory or a file (a raw block bind's), once nothing is mounted on it. */
async function removePoint(path: string): Promise<void> {
  if ((await lstat(path)).isDirectory()) await rmdir(path);
  else await unlink(path);
}

/** sweepIn for a caller that only has the state dir (a CSI server's start): nothing when no scratch bind was ever made. */
export async function sweepScratchBinds(steps: BindSteps, stateDir: string): Promise<string[]> {
  const real = await realpath(join(stateDir, SCRATCH_BINDS)).catch(() => undefined);
  return real === undefined ? [] : sweepIn(steps, real);
}
