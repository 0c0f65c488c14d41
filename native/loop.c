/*
 * A loop device bound to an image file and let go again without losetup (shared/mounter.ts
 * mountImage, loopAttach, loopDetach, loopRefresh): a free device from /dev/loop-control,
 * LOOP_CONFIGURE, LOOP_CLR_FD and LOOP_SET_CAPACITY. Each call answers what happened; trying losetup
 * or mount -o loop instead, which word a failure, is decided in TypeScript.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "addon.h"

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
static int bind_free_loop(int file, const char *image, bool autoclear, bool read_only, int *device) {
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
    config.info.lo_flags = (autoclear ? LO_FLAGS_AUTOCLEAR : 0) | (read_only ? LO_FLAGS_READ_ONLY : 0);
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
 * loopAttach(image, autoclear[, readOnly]): { device: "/dev/loopN", fd } with the device bound to the
 * image and open as fd, or a negative errno (the caller then runs losetup or mount -o loop, which word
 * it). With autoclear the kernel lets the device go at its last close: the caller closes fd once a
 * mount holds the device, or at once if the mount failed; a process that dies first closes it too.
 * Without, the device stays bound until loopDetach. With readOnly the device refuses every write
 * (LO_FLAGS_READ_ONLY, its image opened read-only): a read-only mount flag on a bind of a device node
 * does not, since the kernel checks it only for the files of the filesystem the node lies in. An
 * addon built before readOnly refuses the third argument (EINVAL), so it never binds a writable
 * device where a read-only one was asked for.
 */
napi_value tv_loop_attach(napi_env env, napi_callback_info info) {
  napi_value argv[3], out, v;
  char image[MAX_STRING], path[32];
  size_t argc = 3;
  bool autoclear, read_only = false;
  int err, present, file, device = -1, nr;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || argc > 3) return tv_errno_value(env, -EINVAL);
  if ((err = tv_string_arg(env, argv[0], image, &present)) || !present) return tv_errno_value(env, -(err ? err : EINVAL));
  if (napi_get_value_bool(env, argv[1], &autoclear) != napi_ok) return tv_errno_value(env, -EINVAL);
  if (argc == 3 && napi_get_value_bool(env, argv[2], &read_only) != napi_ok) return tv_errno_value(env, -EINVAL);
  if ((file = open(image, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC)) < 0) return tv_errno_value(env, -errno);
  nr = bind_free_loop(file, image, autoclear, read_only, &device);
  /* The device holds the file from here: this descriptor is not needed. */
  close(file);
  if (nr < 0) return tv_errno_value(env, nr);
  snprintf(path, sizeof path, "/dev/loop%d", nr);
  if (napi_create_object(env, &out) == napi_ok && tv_set(env, out, "device", napi_create_string_utf8(env, path, NAPI_AUTO_LENGTH, &v), &v) &&
      tv_set(env, out, "fd", napi_create_int32(env, device, &v), &v))
    return out;
  /* No answer can name the device: let it go, as a bind that failed would have left nothing. */
  ioctl(device, LOOP_CLR_FD, 0);
  close(device);
  return tv_errno_value(env, -ENOMEM);
}

/*
 * closeFd(fd): close(2), 0 or the errno. For loopAttach's descriptor: Node's own close of a descriptor
 * it did not open warns on a worker thread (the CSI server's service thread).
 */
napi_value tv_close_fd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0)
    return tv_errno_value(env, EINVAL);
  return tv_errno_value(env, close(fd) != 0 ? errno : 0);
}

/* `request` (an ioctl without an argument) on the device the call names: 0, or the errno. */
static napi_value device_ioctl(napi_env env, napi_callback_info info, unsigned long request) {
  napi_value argv[1];
  char device[MAX_STRING];
  int err, fd;
  if ((err = tv_args_with_path(env, info, 1, argv, device))) return tv_errno_value(env, err);
  if ((fd = open(device, O_RDONLY | O_CLOEXEC)) < 0) return tv_errno_value(env, errno);
  err = ioctl(fd, request, 0) != 0 ? errno : 0;
  close(fd);
  return tv_errno_value(env, err);
}

/*
 * loopDetach(device): LOOP_CLR_FD, as losetup --detach: a device still open elsewhere (mounted) is
 * flagged to be let go at its last close instead.
 */
napi_value tv_loop_detach(napi_env env, napi_callback_info info) {
  return device_ioctl(env, info, LOOP_CLR_FD);
}

/* loopRefresh(device): LOOP_SET_CAPACITY, as losetup --set-capacity: the device takes its file's new size. */
napi_value tv_loop_refresh(napi_env env, napi_callback_info info) {
  return device_ioctl(env, info, LOOP_SET_CAPACITY);
}
