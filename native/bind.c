/*
 * A bind mount made with its flags in one step (shared/mounter.ts bindWithFlagsNatively): the source
 * is cloned into a detached mount (open_tree), the flags are set on that clone while nothing can see
 * it (mount_setattr), and only then is it moved onto the target (move_mount). mount(2) can only bind
 * first and remount with the flags after, so a process killed between the two left a "read-only"
 * publish writable; kubelet never repeats a FlexVolume mount on a path that is a mount point, so
 * nothing repaired it. Here a kill at any point leaves either nothing on the target or the finished
 * mount: the clone, until moved, goes with its descriptor.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "addon.h"

/*
 * Linux 5.2 (open_tree, move_mount) and 5.12 (mount_setattr). The kernel's ABI is spelt here, with
 * names of this file's own, as older headers lack it and glibc's and the kernel's headers clash over
 * it. The numbers are the unified table's (x86-64 and arm64); elsewhere the call answers ENOSYS and
 * the caller binds with mount(2) and a remount.
 */
#if defined(__x86_64__) || defined(__aarch64__)
#define TV_NR_OPEN_TREE 428
#define TV_NR_MOVE_MOUNT 429
#define TV_NR_MOUNT_SETATTR 442
#endif
#define TV_OPEN_TREE_CLONE 1U
#define TV_AT_EMPTY_PATH 0x1000
#define TV_MOVE_MOUNT_F_EMPTY_PATH 0x4U
#define TV_MOVE_MOUNT_T_EMPTY_PATH 0x40U
#define TV_ATTR_RDONLY 0x1ULL
#define TV_ATTR_NOSUID 0x2ULL
#define TV_ATTR_NODEV 0x4ULL
#define TV_ATTR_NOEXEC 0x8ULL
#define TV_ATTR_ATIME_MASK 0x70ULL
#define TV_ATTR_NOATIME 0x10ULL
#define TV_ATTR_STRICTATIME 0x20ULL
#define TV_ATTR_NODIRATIME 0x80ULL

struct tv_mount_attr {
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* MS_* flags (what the TypeScript already speaks: shared/mount-options.ts) as mount attributes; relatime is 0 in both. */
static uint64_t attributes_of(unsigned long ms) {
  return ((ms & MS_RDONLY) ? TV_ATTR_RDONLY : 0) | ((ms & MS_NOSUID) ? TV_ATTR_NOSUID : 0) | ((ms & MS_NODEV) ? TV_ATTR_NODEV : 0) |
         ((ms & MS_NOEXEC) ? TV_ATTR_NOEXEC : 0) | ((ms & MS_NOATIME) ? TV_ATTR_NOATIME : 0) |
         ((ms & MS_STRICTATIME) ? TV_ATTR_STRICTATIME : 0) | ((ms & MS_NODIRATIME) ? TV_ATTR_NODIRATIME : 0);
}

/*
 * bindWithFlags(source, targetFd, set, clear): binds `source` (not recursively, as MS_BIND) onto the
 * directory open as `targetFd` (shared/pinned-target.ts), the flags in `set` added to those the
 * source's mount has and those in `clear` taken off (MS_* numbers; an atime rule in `set` replaces
 * the source's). 0, or the errno of the step that failed, with nothing mounted.
 */
napi_value tv_bind_with_flags(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  char source[MAX_STRING];
  int present, target, err;
  unsigned long set, clear;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 4) return tv_errno_value(env, EINVAL);
  if ((err = tv_string_arg(env, argv[0], source, &present)) || (err = tv_fd_arg(env, argv[1], 0, &target)) ||
      (err = tv_flags_arg(env, argv[2], &set)) || (err = tv_flags_arg(env, argv[3], &clear)))
    return tv_errno_value(env, err);
  if (!present) return tv_errno_value(env, EINVAL);
#ifndef TV_NR_OPEN_TREE
  return tv_errno_value(env, ENOSYS);
#else
  struct tv_mount_attr attr = {attributes_of(set), attributes_of(clear), 0, 0};
  if (set & (MS_NOATIME | MS_RELATIME | MS_STRICTATIME)) attr.attr_clr |= TV_ATTR_ATIME_MASK;
  int tree = (int)syscall(TV_NR_OPEN_TREE, AT_FDCWD, source, TV_OPEN_TREE_CLONE | O_CLOEXEC);
  if (tree < 0) return tv_errno_value(env, errno);
  err = 0;
  if (syscall(TV_NR_MOUNT_SETATTR, tree, "", TV_AT_EMPTY_PATH, &attr, sizeof attr) != 0 ||
      syscall(TV_NR_MOVE_MOUNT, tree, "", target, "", TV_MOVE_MOUNT_F_EMPTY_PATH | TV_MOVE_MOUNT_T_EMPTY_PATH) != 0)
    err = errno;
  close(tree);
  return tv_errno_value(env, err);
#endif
}
