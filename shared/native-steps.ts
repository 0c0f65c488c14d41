import { constants as osConstants } from 'node:os';
import { longCallsBlock } from './fs-async.js';
import { bindFlagChanges, mountFlags, remountFlags } from './mount-options.js';
import { type CallMade, callNatively, callNativelyAsync, type LoopAttached, type NativeMount, nativeMount } from './native-mount.js';
import { fdPath, type MountTarget, type PinnedTarget } from './pinned-target.js';

/**
 * Mounter's steps as system calls through the mount addon (shared/native-mount.ts), each recorded as
 * a spawned tool is: false (or undefined) leaves the step to the tool (shared/mounter.ts), which
 * words what went wrong.
 */

/**
 * `mount --bind` as one system call (shared/native-mount.ts), onto the descriptor the tool gets as
 * fd 3 (shared/pinned-target.ts): true once it is made. False leaves it
 * to mount(8): no addon, or the call failed, and the tool then fails with its own words.
 */
export function bindNatively(source: string, pinned: PinnedTarget, target: MountTarget): boolean {
  const native = nativeMount();
  if (!native) return false;
  return callNatively({ call: 'mount', source, target: target.path, options: ['bind'] }, () => native.mount(source, fdPath(pinned.handle), null, native.MS_BIND, null));
}

/**
 * A bind with its flags in one step (native/bind.c): the flags are set on a detached clone of the
 * source before it is moved onto the target, so no process killed midway leaves a "read-only"
 * publish writable, which kubelet never repairs for FlexVolume (it does not repeat a mount on a
 * mount point). False leaves it to bind and remount: no addon or one built before this, a kernel
 * before 5.12, a seccomp filter, or an option that is no flag.
 */
export function bindWithFlagsNatively(source: string, pinned: PinnedTarget, target: MountTarget, options: readonly string[]): boolean {
  const native = nativeMount();
  const bindWithFlags = native?.bindWithFlags;
  const changes = native && bindFlagChanges(native, options);
  if (!bindWithFlags || !changes) return false;
  const what = { call: 'move_mount', source, target: target.path, options: ['bind', ...options] } as const;
  let errno = 0;
  const made = callNatively(what, () => (errno = bindWithFlags(source, pinned.handle.fd, changes.set, changes.clear)));
  // A kernel before 5.12 says so once, and the loaded addon is then used without the call: a
  // long-running server does not fail (and count) it at every publish.
  if (errno === osConstants.errno.ENOSYS) Reflect.deleteProperty(native, 'bindWithFlags');
  return made;
}

/**
 * Filesystems whose mount(8) runs no helper (mount.<type>) and passes no options of its own: for
 * them mount(2) with the flags does all that mount(8) would. Any other (nfs, cifs, fuse) goes to mount(8).
 */
const PLAIN_FILESYSTEMS = new Set(['ext2', 'ext3', 'ext4', 'xfs']);

/**
 * A filesystem mount (a block volume's device) as one system call, onto the pinned target: false
 * leaves it to mount(8), as bindNatively. Only options that are mount flags are given natively; a
 * filesystem's own (nouuid, data=..., discard) go to mount(8), which knows how to pass them.
 */
export async function mountNatively(source: string, pinned: PinnedTarget, target: MountTarget, fsType: string | undefined, options: readonly string[]): Promise<boolean> {
  const native = nativeMount();
  if (!native || fsType === undefined || !PLAIN_FILESYSTEMS.has(fsType)) return false;
  const flags = mountFlags(native, options);
  if (flags === undefined) return false;
  // A journal replayed at the mount (an unclean shutdown) may take long.
  const what = { call: 'mount', source, target: target.path, fsType, options } as const;
  return callWaitingOnDisk(what, [source, fdPath(pinned.handle), fsType, flags, null], native.mount, native.mountAsync);
}

/** umount2 of the path, not following a symlink put in its place; it may flush what was written to the filesystem. */
export function unmountNatively(native: NativeMount, target: string): Promise<boolean> | boolean {
  return callWaitingOnDisk({ call: 'umount2', target, options: ['nofollow'] }, [target, native.UMOUNT_NOFOLLOW], native.umount, native.umountAsync);
}

/**
 * A mount or unmount that may wait on the disk (an unmount flushes what was written to a filesystem it
 * is the last mount of: 185 ms for 96 MiB here), with the same arguments either way: on libuv's
 * threadpool (`offThread`) so that the CSI service thread serves other calls meanwhile, except where
 * this process runs its long calls on its own thread (a FlexVolume call: shared/fs-async.ts
 * longCallsBlock) or the addon has no such call.
 */
function callWaitingOnDisk<A extends unknown[]>(
  what: CallMade,
  args: A,
  onThread: (...args: A) => number,
  offThread: ((...args: A) => Promise<number>) | undefined,
): Promise<boolean> | boolean {
  if (offThread && !longCallsBlock()) return callNativelyAsync(what, () => offThread(...args));
  return callNatively(what, () => onThread(...args));
}

/**
 * A loop device bound to the image by the addon, recorded as its ioctl; undefined leaves it to
 * losetup or mount -o loop, which word what went wrong (no device free, say).
 */
export function loopAttachNatively(image: string, autoclear: boolean, readOnly = false): LoopAttached | undefined {
  const attach = nativeMount()?.loopAttach;
  if (!attach) return undefined;
  let attached: LoopAttached | undefined;
  callNatively({ call: 'ioctl', target: image, options: ['LOOP_CONFIGURE', ...(autoclear ? ['autoclear'] : []), ...(readOnly ? ['read-only'] : [])] }, () => {
    const answer = attach(image, autoclear, readOnly);
    if (typeof answer === 'number') return answer;
    attached = answer;
    return 0;
  });
  return attached;
}

/** A loop device's ioctl through the addon (`call`, absent in an older addon), recorded: false leaves it to losetup. */
export function loopIoctlNatively(device: string, request: 'LOOP_CLR_FD' | 'LOOP_SET_CAPACITY', call: ((device: string) => number) | undefined): boolean {
  return call !== undefined && callNatively({ call: 'ioctl', target: device, options: [request] }, () => call(device));
}

/** `mount -o remount,bind,<options>` as one system call: false leaves it to mount(8). */
export function remountNatively(options: readonly string[], root: PinnedTarget, target: MountTarget): boolean {
  const native = nativeMount();
  if (!native) return false;
  const flags = remountFlags(native, options);
  if (flags === undefined) return false;
  return callNatively({ call: 'mount', target: target.path, options: ['remount', 'bind', ...options] }, () => native.mount(null, fdPath(root.handle), null, flags, null));
}
