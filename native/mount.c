/*
 * mount(2) and umount2(2) for the CSI server and the FlexVolume executable (shared/native-mount.ts),
 * statx(2)'s answer to "is this path the root of a mount" (shared/mountinfo.ts isMountPoint), and
 * statx(2) with statmount(2) for "which mount is on top at this path" (shared/mountinfo.ts topMountAt),
 * and a loop device bound to an image file and let go again (shared/mounter.ts mountImage, loopAttach).
 * Spawning mount(8) for a bind mount costs a fork and an exec, about 2 ms each way, where the system
 * call takes tens of microseconds. Each call answers 0 or the errno it failed with; what to do about
 * a failure (try mount(8), which words it) is decided in TypeScript. Nothing here keeps state: the
 * buffers are on the stack, so threads of one process (the CSI server's workers) may call at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <node_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

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

#define MAX_STRING 4096

/* Copies a string argument into buf; *present is 0 for null or undefined. Returns 0, or an errno. */
static int string_arg(napi_env env, napi_value value, char *buf, int *present) {
  napi_valuetype type;
  size_t length = 0;
  if (napi_typeof(env, value, &type) != napi_ok) return EINVAL;
  if (type == napi_null || type == napi_undefined) {
    *present = 0;
    return 0;
  }
  if (type != napi_string) return EINVAL;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) return EINVAL;
  if (length >= MAX_STRING) return ENAMETOOLONG;
  if (napi_get_value_string_utf8(env, value, buf, MAX_STRING, &length) != napi_ok) return EINVAL;
  /* A NUL inside would cut the path short: refuse rather than act on another path. */
  if (strlen(buf) != length) return EINVAL;
  *present = 1;
  return 0;
}

static int flags_arg(napi_env env, napi_value value, unsigned long *flags) {
  int64_t n;
  if (napi_get_value_int64(env, value, &n) != napi_ok || n < 0 || n > 0xffffffffLL) return EINVAL;
  *flags = (unsigned long)n;
  return 0;
}

static napi_value errno_value(napi_env env, int err) {
  napi_value out;
  napi_create_int32(env, err, &out);
  return out;
}

/* mount(source | null, target, fstype | null, flags, data | null) */
static napi_value do_mount(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  char source[MAX_STRING], target[MAX_STRING], fstype[MAX_STRING], data[MAX_STRING];
  int has_source, has_target, has_fstype, has_data, err;
  unsigned long flags;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 5) return errno_value(env, EINVAL);
  if ((err = string_arg(env, argv[0], source, &has_source)) || (err = string_arg(env, argv[1], target, &has_target)) ||
      (err = string_arg(env, argv[2], fstype, &has_fstype)) || (err = flags_arg(env, argv[3], &flags)) ||
      (err = string_arg(env, argv[4], data, &has_data)))
    return errno_value(env, err);
  if (!has_target) return errno_value(env, EINVAL);
  if (mount(has_source ? source : NULL, target, has_fstype ? fstype : NULL, flags, has_data ? data : NULL) != 0) return errno_value(env, errno);
  return errno_value(env, 0);
}

/* The call's `want` arguments, the first a path (required) copied into path: 0, or an errno. */
static int args_with_path(napi_env env, napi_callback_info info, size_t want, napi_value *argv, char *path) {
  size_t argc = want;
  int present, err;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != want) return EINVAL;
  if ((err = string_arg(env, argv[0], path, &present))) return err;
  return present ? 0 : EINVAL;
}

/* umount(target, flags) */
static napi_value do_umount(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  char target[MAX_STRING];
  int err;
  unsigned long flags;
  if ((err = args_with_path(env, info, 2, argv, target)) || (err = flags_arg(env, argv[1], &flags))) return errno_value(env, err);
  if (umount2(target, (int)flags) != 0) return errno_value(env, errno);
  return errno_value(env, 0);
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
  if ((err = args_with_path(env, info, 1, argv, path))) return err;
  return statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, mask, stx) != 0 ? errno : 0;
}

/*
 * mountRoot(path): 1 when the path (its last part not followed) is the root of a mount, 0 when not,
 * or a negative errno: -EOPNOTSUPP when this kernel does not say (before 5.8).
 */
static napi_value do_mount_root(napi_env env, napi_callback_info info) {
  struct statx stx;
  int err;
  if ((err = statx_of_path_arg(env, info, STATX_TYPE, &stx))) return errno_value(env, -err);
  if (!(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) return errno_value(env, -EOPNOTSUPP);
  return errno_value(env, (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? 1 : 0);
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
  return errno_value(env, -ENOSYS);
#else
  napi_value out, v;
  int err;
  struct statx stx;
  if ((err = statx_of_path_arg(env, info, STATX_MNT_ID_UNIQUE, &stx))) return errno_value(env, -err);
  if (!(stx.stx_mask & STATX_MNT_ID_UNIQUE)) return errno_value(env, -EOPNOTSUPP);
  struct tv_mnt_id_req req = {sizeof req, 0, stx.stx_mnt_id, TV_STATMOUNT_MNT_BASIC | TV_STATMOUNT_MNT_POINT};
  /* The head, then the mount point's text: a path is at most PATH_MAX (4096) with its NUL. */
  union {
    struct tv_statmount_head head;
    char bytes[sizeof(struct tv_statmount_head) + MAX_STRING + 64];
  } buf;
  memset(&buf.head, 0, sizeof buf.head);
  if (syscall(TV_NR_STATMOUNT, &req, &buf, sizeof buf, 0) != 0) return errno_value(env, -errno);
  const uint64_t want = TV_STATMOUNT_MNT_BASIC | TV_STATMOUNT_MNT_POINT;
  size_t strings = sizeof buf.head, end = buf.head.size < sizeof buf ? buf.head.size : sizeof buf;
  if ((buf.head.mask & want) != want || end <= strings || buf.head.mnt_point >= end - strings) return errno_value(env, -EOPNOTSUPP);
  const char *point = buf.bytes + strings + buf.head.mnt_point;
  size_t length = strnlen(point, end - strings - buf.head.mnt_point);
  if (length == end - strings - buf.head.mnt_point) return errno_value(env, -EOPNOTSUPP);
  napi_create_object(env, &out);
  napi_create_uint32(env, buf.head.mnt_id_old, &v);
  napi_set_named_property(env, out, "id", v);
  napi_create_uint32(env, buf.head.mnt_parent_id_old, &v);
  napi_set_named_property(env, out, "parentId", v);
  napi_create_string_utf8(env, point, length, &v);
  napi_set_named_property(env, out, "mountPoint", v);
  return out;
#endif
}

/* Linux 5.8; where the headers lack it, the kernel's number. An older kernel refuses it (EINVAL). */
#ifndef LOOP_CONFIGURE
#define LOOP_CONFIGURE 0x4C0A
struct loop_config {
  uint32_t fd;
  uint32_t block_size;
  struct loop_info64 info;
  uint64_t __reserved[8];
};
#endif

/* Tries at a free device: another process may bind the one LOOP_CTL_GET_FREE named before this does. */
#define LOOP_TRIES 16

/*
 * Binds a free loop device to the open image `file`, as losetup --find does: the device's number,
 * with its descriptor left open in *device, or a negative errno. The device may be taken between
 * LOOP_CTL_GET_FREE and LOOP_CONFIGURE (EBUSY): another is asked for.
 */
static int bind_free_loop(int file, const char *image, bool autoclear, int *device) {
  int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC), err = EBUSY, nr = -1;
  if (control < 0) return -errno;
  for (int tries = 0; tries < LOOP_TRIES && err == EBUSY; tries++) {
    char path[32];
    if ((nr = ioctl(control, LOOP_CTL_GET_FREE)) < 0) {
      err = errno;
      break;
    }
    snprintf(path, sizeof path, "/dev/loop%d", nr);
    if ((*device = open(path, O_RDWR | O_CLOEXEC)) < 0) {
      err = errno;
      break;
    }
    struct loop_config config;
    memset(&config, 0, sizeof config);
    config.fd = (uint32_t)file;
    config.info.lo_flags = autoclear ? LO_FLAGS_AUTOCLEAR : 0;
    /* What losetup --list shows where sysfs is not read; sysfs names the file itself. */
    memcpy(config.info.lo_file_name, image, strnlen(image, LO_NAME_SIZE - 1));
    if (ioctl(*device, LOOP_CONFIGURE, &config) == 0) err = 0;
    else {
      err = errno;
      close(*device);
    }
  }
  close(control);
  return err ? -err : nr;
}

/*
 * loopAttach(image, autoclear): { device: "/dev/loopN", fd } with the device bound to the image and
 * open as fd, or a negative errno (the caller then runs losetup or mount -o loop, which word it). With
 * autoclear the kernel lets the device go at its last close: the caller closes fd once a mount holds
 * the device, or at once if the mount failed; a process that dies first closes it too. Without, the
 * device stays bound until loopDetach.
 */
static napi_value do_loop_attach(napi_env env, napi_callback_info info) {
  napi_value argv[2], out, v;
  char image[MAX_STRING], path[32];
  bool autoclear;
  int err, file, device = -1, nr;
  if ((err = args_with_path(env, info, 2, argv, image))) return errno_value(env, -err);
  if (napi_get_value_bool(env, argv[1], &autoclear) != napi_ok) return errno_value(env, -EINVAL);
  if ((file = open(image, O_RDWR | O_CLOEXEC)) < 0) return errno_value(env, -errno);
  nr = bind_free_loop(file, image, autoclear, &device);
  /* The device holds the file from here: this descriptor is not needed. */
  close(file);
  if (nr < 0) return errno_value(env, nr);
  snprintf(path, sizeof path, "/dev/loop%d", nr);
  napi_create_object(env, &out);
  napi_create_string_utf8(env, path, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, out, "device", v);
  napi_create_int32(env, device, &v);
  napi_set_named_property(env, out, "fd", v);
  return out;
}

/*
 * closeFd(fd): close(2), 0 or the errno. For loopAttach's descriptor: Node's own close of a descriptor
 * it did not open warns on a worker thread (the CSI server's service thread).
 */
static napi_value do_close_fd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0)
    return errno_value(env, EINVAL);
  return errno_value(env, close(fd) != 0 ? errno : 0);
}

/*
 * loopDetach(device): 0, or the errno. LOOP_CLR_FD, as losetup --detach: a device still open
 * elsewhere (mounted) is flagged to be let go at its last close instead.
 */
static napi_value do_loop_detach(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  char device[MAX_STRING];
  int err, fd;
  if ((err = args_with_path(env, info, 1, argv, device))) return errno_value(env, err);
  if ((fd = open(device, O_RDONLY | O_CLOEXEC)) < 0) return errno_value(env, errno);
  err = ioctl(fd, LOOP_CLR_FD, 0) != 0 ? errno : 0;
  close(fd);
  return errno_value(env, err);
}

static void set_function(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value f;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &f);
  napi_set_named_property(env, exports, name, f);
}

static void set_number(napi_env env, napi_value exports, const char *name, double value) {
  napi_value v;
  napi_create_double(env, value, &v);
  napi_set_named_property(env, exports, name, v);
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
};

/* Context-aware: the CSI server loads it on its service thread (a worker). */
NAPI_MODULE_INIT() {
  set_function(env, exports, "mount", do_mount);
  set_function(env, exports, "umount", do_umount);
  set_function(env, exports, "mountRoot", do_mount_root);
  set_function(env, exports, "topMount", do_top_mount);
  set_function(env, exports, "loopAttach", do_loop_attach);
  set_function(env, exports, "loopDetach", do_loop_detach);
  set_function(env, exports, "closeFd", do_close_fd);
  for (size_t i = 0; i < sizeof CONSTANTS / sizeof CONSTANTS[0]; i++) set_number(env, exports, CONSTANTS[i].name, (double)CONSTANTS[i].value);
  return exports;
}
