/*
 * The argument and answer helpers every call of the addon shares (native/mount.c, native/loop.c,
 * native/spawn.c): strings copied into fixed buffers and refused when they hold a NUL, arrays of
 * them as NULL-terminated vectors, flags as a bounded integer, an errno as a number.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "addon.h"

/* Copies a string argument into buf; *present is 0 for null or undefined. Returns 0, or an errno. */
int tv_string_arg(napi_env env, napi_value value, char *buf, int *present) {
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

int tv_flags_arg(napi_env env, napi_value value, unsigned long *flags) {
  int64_t n;
  if (napi_get_value_int64(env, value, &n) != napi_ok || n < 0 || n > 0xffffffffLL) return EINVAL;
  *flags = (unsigned long)n;
  return 0;
}

/*
 * NULL when N-API cannot make the number (no memory, an exception pending): a value left unset would
 * be read uninitialised. JavaScript then sees undefined, which the callers take as a failure
 * (shared/native-mount.ts).
 */
napi_value tv_errno_value(napi_env env, int err) {
  napi_value out;
  return napi_create_int32(env, err, &out) == napi_ok ? out : NULL;
}

/*
 * obj[key] = *value, where making the value returned `made`: both must have worked. By pointer: the
 * value is read here, after the call that makes it, since C evaluates a call's arguments in no set order.
 */
int tv_set(napi_env env, napi_value obj, const char *key, napi_status made, const napi_value *value) {
  return made == napi_ok && napi_set_named_property(env, obj, key, *value) == napi_ok;
}

/* The call's `want` arguments, the first a path (required) copied into path: 0, or an errno. */
int tv_args_with_path(napi_env env, napi_callback_info info, size_t want, napi_value *argv, char *path) {
  size_t argc = want;
  int present, err;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != want) return EINVAL;
  if ((err = tv_string_arg(env, argv[0], path, &present))) return err;
  return present ? 0 : EINVAL;
}

/* A JS array's length, refused above `most` (E2BIG) or when it is no array (EINVAL). */
static int array_arg(napi_env env, napi_value value, uint32_t most, uint32_t *n) {
  bool is_array;
  if (napi_is_array(env, value, &is_array) != napi_ok || !is_array || napi_get_array_length(env, value, n) != napi_ok) return EINVAL;
  return *n > most ? E2BIG : 0;
}

/*
 * A string argument copied to a buffer of its own size (*out, freed by the caller), refused when it
 * holds a NUL. No cap of ours: an argument or environment string is the kernel's to refuse
 * (E2BIG from the exec, above 128 KiB), as it is for a child started by libuv. A driver's options
 * are one argument, with the pod's secrets in it, and can pass 4 KiB (a certificate).
 */
static int string_copy(napi_env env, napi_value value, char **out) {
  napi_valuetype type;
  size_t length = 0;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_string) return EINVAL;
  if (napi_get_value_string_utf8(env, value, NULL, 0, &length) != napi_ok) return EINVAL;
  if (!(*out = malloc(length + 1))) return ENOMEM;
  if (napi_get_value_string_utf8(env, value, *out, length + 1, &length) != napi_ok) return EINVAL;
  return strlen(*out) == length ? 0 : EINVAL;
}

/* Each string of a JS array copied into one NULL-terminated vector (freed with tv_free_vector); 0 or an errno. */
int tv_vector_arg(napi_env env, napi_value value, char ***out) {
  uint32_t n;
  int err = array_arg(env, value, MAX_ITEMS, &n);
  if (err) return err;
  char **v = calloc(n + 1, sizeof *v);
  if (!v) return ENOMEM;
  *out = v;
  for (uint32_t i = 0; i < n; i++) {
    napi_value item;
    if (napi_get_element(env, value, i, &item) != napi_ok) return EINVAL;
    if ((err = string_copy(env, item, &v[i]))) return err;
  }
  return 0;
}

void tv_free_vector(char **v) {
  if (!v) return;
  for (char **p = v; *p; p++) free(*p);
  free(v);
}

/* A descriptor argument of at least `min`: 0, or EBADF. Read as an int64: napi_get_value_int32 wraps 2**32 + 3 to 3. */
int tv_fd_arg(napi_env env, napi_value value, int min, int *fd) {
  int64_t n;
  if (napi_get_value_int64(env, value, &n) != napi_ok || n < min || n > INT32_MAX) return EBADF;
  *fd = (int)n;
  return 0;
}

/*
 * Descriptors to hand a child from its fd 3 on (native/spawn.c): at most `most`, and the j-th at least
 * 3 + j. The child dup2s them in order onto 3, 4, ...: one below its own place would be overwritten by
 * an earlier dup2 before it is read (EBADF, not a wrong file).
 */
int tv_fds_arg(napi_env env, napi_value value, int *fds, uint32_t most, uint32_t *n) {
  int err = array_arg(env, value, most, n);
  for (uint32_t i = 0; !err && i < *n; i++) {
    napi_value item;
    err = napi_get_element(env, value, i, &item) != napi_ok ? EBADF : tv_fd_arg(env, item, 3 + (int)i, &fds[i]);
  }
  return err;
}
