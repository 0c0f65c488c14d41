/*
 * mount(2) and umount2(2) for the CSI server and the FlexVolume executable (shared/native-mount.ts),
 * statx(2)'s answer to "is this path the root of a mount" (shared/mountinfo.ts isMountPoint), and
 * statx(2) with statmount(2) for "which mount is on top at this path" (shared/mountinfo.ts topMountAt),
 * and the module's exports (loop devices are native/loop.c's, a bind with its flags native/bind.c's).
 * Spawning mount(8) for a bind mount costs a fork and an exec, about 2 ms each way, where the system
 * call takes tens of microseconds. Each call answers 0 or the errno it failed with; what to do about
 * a failure (try mount(8), which words it) is decided in TypeScript. Nothing here keeps state: a
 * call's buffers are on the stack, or its own on the heap while it runs on the threadpool, so threads
 * of one process (the CSI server's workers) may call at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "addon.h"

/* Linux 5.8; older headers lack the name, and an older kernel leaves it out of stx_attributes_mask. */
#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

/*
 * Linux 6.8: statx's 64-bit mount id that is never reused, and statmount(2), which answers for one
 * mount by that id. This system's headers may predate both, so the kernel's ABI is spelt here: the
 * request (MNT_ID_REQ_SIZE_VER0) and the fixed head of struct statmount, whose strings start at byte
 * 512. 457 is statmount's number on x86-64 and arm64 (the unified table); elsewhere it is not called.
 */
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif
#define TV_STATMOUNT_MNT_BASIC 0x00000002U
#define TV_STATMOUNT_MNT_POINT 0x00000010U
#if defined(__x86_64__) || defined(__aarch64__)
#define TV_NR_STATMOUNT 457
#endif

struct tv_mnt_id_req {
  uint32_t size;
  uint32_t spare;
  uint64_t mnt_id;
  uint64_t param;
};

struct tv_statmount_head {
  uint32_t size;
  uint32_t spare1;
  uint64_t mask;
  uint32_t sb_dev_major, sb_dev_minor;
  uint64_t sb_magic;
  uint32_t sb_flags, fs_type;
  uint64_t mnt_id, mnt_parent_id;
  uint32_t mnt_id_old, mnt_parent_id_old;
  uint64_t mnt_attr, mnt_propagation, mnt_peer_group, mnt_master, propagate_from;
  uint32_t mnt_root, mnt_point;
  uint64_t spare2[50];
};

/* One mount(2) or umount2(2) with its arguments copied: made here, or on libuv's threadpool. */
struct mount_call {
  napi_async_work work;
  napi_deferred deferred;
  int umount, has_source, has_fstype, has_data, err;
  unsigned long flags;
  char source[MAX_STRING], target[MAX_STRING], fstype[MAX_STRING], data[MAX_STRING];
};

/* (source | null, target, fstype | null, flags, data | null) into c: 0, or an errno. */
static int mount_args(napi_env env, napi_callback_info info, struct mount_call *c) {
  size_t argc = 5;
  napi_value argv[5];
  int has_target, err;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 5) return EINVAL;
  if ((err = tv_string_arg(env, argv[0], c->source, &c->has_source)) || (err = tv_string_arg(env, argv[1], c->target, &has_target)) ||
      (err = tv_string_arg(env, argv[2], c->fstype, &c->has_fstype)) || (err = tv_flags_arg(env, argv[3], &c->flags)) ||
      (err = tv_string_arg(env, argv[4], c->data, &c->has_data)))
    return err;
  c->umount = 0;
  return has_target ? 0 : EINVAL;
}

/* (target, flags) into c: 0, or an errno. */
static int umount_args(napi_env env, napi_callback_info info, struct mount_call *c) {
  napi_value argv[2];
  int err;
  if ((err = tv_args_with_path(env, info, 2, argv, c->target)) || (err = tv_flags_arg(env, argv[1], &c->flags))) return err;
  c->umount = 1;
  return 0;
}

static void make_call(struct mount_call *c) {
  int failed = c->umount ? umount2(c->target, (int)c->flags)
                         : mount(c->has_source ? c->source : NULL, c->target, c->has_fstype ? c->fstype : NULL, c->flags, c->has_data ? c->data : NULL);
  c->err = failed != 0 ? errno : 0;
}

/* How a call's arguments are read (mount_args, umount_args). */
typedef int (*call_args)(napi_env, napi_callback_info, struct mount_call *);

/* The call made here: 0 or the errno, as for bad arguments. */
static napi_value call_here(napi_env env, napi_callback_info info, call_args args) {
  struct mount_call c;
  int err = args(env, info, &c);
  if (err) return tv_errno_value(env, err);
  make_call(&c);
  return tv_errno_value(env, c.err);
}

/* mount(source | null, target, fstype | null, flags, data | null) and umount(target, flags). */
static napi_value do_mount(napi_env env, napi_callback_info info) {
  return call_here(env, info, mount_args);
}

static napi_value do_umount(napi_env env, napi_callback_info info) {
  return call_here(env, info, umount_args);
}

static void execute_call(napi_env env, void *data) {
  (void)env;
  make_call(data);
}

/* Settles the promise whatever happens: a number, or undefined if even that cannot be made (a failure to the caller). */
static void settle(napi_env env, napi_deferred deferred, int err) {
  napi_value v = tv_errno_value(env, err);
  if (!v && napi_get_undefined(env, &v) != napi_ok) return;
  napi_resolve_deferred(env, deferred, v);
}

static void complete_call(napi_env env, napi_status status, void *data) {
  struct mount_call *c = data;
  settle(env, c->deferred, status == napi_ok ? c->err : ECANCELED);
  napi_delete_async_work(env, c->work);
  free(c);
}

/*
 * A promise of the call's errno, the call made on libuv's threadpool: a filesystem's mount may replay
 * its journal and its unmount flush what was written to it (185 ms for 96 MiB here), which on the
 * CSI server's service thread would hold every other call. Bad arguments answer their errno at once,
 * with nothing queued. The call's buffers are its own, freed when it completes.
 */
static napi_value call_queued(napi_env env, napi_callback_info info, call_args args) {
  napi_value promise, name;
  struct mount_call *c = malloc(sizeof *c);
  int err;
  if (!c) return tv_errno_value(env, ENOMEM);
  if ((err = args(env, info, c)) || (err = napi_create_promise(env, &c->deferred, &promise) != napi_ok ? ENOMEM : 0)) {
    free(c);
    return tv_errno_value(env, err);
  }
  napi_create_string_utf8(env, c->umount ? "umount2" : "mount", NAPI_AUTO_LENGTH, &name);
  if (napi_create_async_work(env, NULL, name, execute_call, complete_call, c, &c->work) == napi_ok) {
    if (napi_queue_async_work(env, c->work) == napi_ok) return promise;
    napi_delete_async_work(env, c->work);
  }
  /* Not queued: made here instead, so the promise still says what happened. */
  make_call(c);
  settle(env, c->deferred, c->err);
  free(c);
  return promise;
}

/* mountAsync and umountAsync: the arguments of mount and umount. */
static napi_value do_mount_async(napi_env env, napi_callback_info info) {
  return call_queued(env, info, mount_args);
}

static napi_value do_umount_async(napi_env env, napi_callback_info info) {
  return call_queued(env, info, umount_args);
}

/*
 * statx of the call's one argument, a path, its last part not followed and nothing automounted;
 * AT_STATX_DONT_SYNC: a network filesystem answers from its cache rather than asking a server that
 * may be gone. 0, or an errno.
 */
static int statx_of_path_arg(napi_env env, napi_callback_info info, unsigned int mask, struct statx *stx) {
  napi_value argv[1];
  char path[MAX_STRING];
  int err;
  if ((err = tv_args_with_path(env, info, 1, argv, path))) return err;
  return statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, mask, stx) != 0 ? errno : 0;
}

/*
 * mountRoot(path): 1 when the path (its last part not followed) is the root of a mount, 0 when not,
 * or a negative errno: -EOPNOTSUPP when this kernel does not say (before 5.8).
 */
static napi_value do_mount_root(napi_env env, napi_callback_info info) {
  struct statx stx;
  int err;
  if ((err = statx_of_path_arg(env, info, STATX_TYPE, &stx))) return tv_errno_value(env, -err);
  if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) return tv_errno_value(env, -EOPNOTSUPP);
  return tv_errno_value(env, (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? 1 : 0);
}

/*
 * topMount(path): the mount on top at the path (its last part not followed), as
 * { id, parentId, mountPoint } with mountinfo's ids and the mount point as the kernel writes it; or a
 * negative errno: -EOPNOTSUPP or -ENOSYS where this kernel cannot say (before 6.8), -EPERM where a
 * seccomp filter refuses statmount. When the path is no mount's root, the answer is the mount it lies
 * on, whose mount point is another path: the caller compares.
 */
static napi_value do_top_mount(napi_env env, napi_callback_info info) {
#ifndef TV_NR_STATMOUNT
  (void)info;
  return tv_errno_value(env, -ENOSYS);
#else
  napi_value out, v;
  int err;
  struct statx stx;
  if ((err = statx_of_path_arg(env, info, STATX_MNT_ID_UNIQUE, &stx))) return tv_errno_value(env, -err);
  if (!(stx.stx_mask & STATX_MNT_ID_UNIQUE)) return tv_errno_value(env, -EOPNOTSUPP);
  struct tv_mnt_id_req req = {sizeof req, 0, stx.stx_mnt_id, TV_STATMOUNT_MNT_BASIC | TV_STATMOUNT_MNT_POINT};
  /* The head, then the mount point's text: a path is at most PATH_MAX (4096) with its NUL. */
  union {
    struct tv_statmount_head head;
    char bytes[sizeof(struct tv_statmount_head) + MAX_STRING + 64];
  } buf;
  memset(&buf.head, 0, sizeof buf.head);
  if (syscall(TV_NR_STATMOUNT, &req, &buf, sizeof buf, 0) != 0) return tv_errno_value(env, -errno);
  const uint64_t want = TV_STATMOUNT_MNT_BASIC | TV_STATMOUNT_MNT_POINT;
  size_t strings = sizeof buf.head, end = buf.head.size < sizeof buf ? buf.head.size : sizeof buf;
  if ((buf.head.mask & want) != want || end <= strings || buf.head.mnt_point >= end - strings) return tv_errno_value(env, -EOPNOTSUPP);
  const char *point = buf.bytes + strings + buf.head.mnt_point;
  size_t length = strnlen(point, end - strings - buf.head.mnt_point);
  if (length == end - strings - buf.head.mnt_point) return tv_errno_value(env, -EOPNOTSUPP);
  /* NULL (undefined to JavaScript) when N-API cannot build it: "cannot tell" (shared/native-mount.ts topMountAnswer). */
  if (napi_create_object(env, &out) != napi_ok || !tv_set(env, out, "id", napi_create_uint32(env, buf.head.mnt_id_old, &v), &v) ||
      !tv_set(env, out, "parentId", napi_create_uint32(env, buf.head.mnt_parent_id_old, &v), &v) ||
      !tv_set(env, out, "mountPoint", napi_create_string_utf8(env, point, length, &v), &v))
    return NULL;
  return out;
#endif
}

/* An export that cannot be made is left out: shared/native-mount.ts parseAddon then does without it. */
static void set_function(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value f;
  tv_set(env, exports, name, napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &f), &f);
}

static void set_number(napi_env env, napi_value exports, const char *name, double value) {
  napi_value v;
  tv_set(env, exports, name, napi_create_double(env, value, &v), &v);
}

/* The flags as this system's headers define them, rather than numbers copied into TypeScript. */
static const struct {
  const char *name;
  unsigned long value;
} CONSTANTS[] = {
    {"MS_RDONLY", MS_RDONLY},     {"MS_NOSUID", MS_NOSUID},         {"MS_NODEV", MS_NODEV},
    {"MS_NOEXEC", MS_NOEXEC},     {"MS_NOATIME", MS_NOATIME},       {"MS_NODIRATIME", MS_NODIRATIME},
    {"MS_RELATIME", MS_RELATIME}, {"MS_STRICTATIME", MS_STRICTATIME}, {"MS_REMOUNT", MS_REMOUNT},
    {"MS_BIND", MS_BIND},         {"UMOUNT_NOFOLLOW", UMOUNT_NOFOLLOW},
    /* shared/bind-by-move.ts: a bind finished on a private scratch mount point, then moved. */
    {"MS_MOVE", MS_MOVE},         {"MS_PRIVATE", MS_PRIVATE},
};

/* Context-aware: the CSI server loads it on its service thread (a worker). */
NAPI_MODULE_INIT() {
  set_function(env, exports, "mount", do_mount);
  set_function(env, exports, "umount", do_umount);
  set_function(env, exports, "mountAsync", do_mount_async);
  set_function(env, exports, "umountAsync", do_umount_async);
  set_function(env, exports, "mountRoot", do_mount_root);
  set_function(env, exports, "topMount", do_top_mount);
  set_function(env, exports, "bindWithFlags", tv_bind_with_flags);
  set_function(env, exports, "loopAttach", tv_loop_attach);
  set_function(env, exports, "loopDetach", tv_loop_detach);
  set_function(env, exports, "loopRefresh", tv_loop_refresh);
  set_function(env, exports, "closeFd", tv_close_fd);
  set_function(env, exports, "spawnTool", tv_spawn_tool);
  set_function(env, exports, "spawnSupported", tv_spawn_supported);
  set_function(env, exports, "spawnDriver", tv_spawn_driver);
  for (size_t i = 0; i < sizeof CONSTANTS / sizeof CONSTANTS[0]; i++) set_number(env, exports, CONSTANTS[i].name, (double)CONSTANTS[i].value);
  return exports;
}
