/* What the addon's files share (native/args.c, native/bind.c, native/loop.c, native/mount.c, native/spawn.c). */
#ifndef TWINVOL_ADDON_H
#define TWINVOL_ADDON_H
#include <node_api.h>

#define MAX_STRING 4096
/*
 * At most this many strings in an array argument (a tool's arguments, its environment): a bound on
 * what one call allocates, not a rule. The kernel's limit is their total size (E2BIG past ARG_MAX, a
 * quarter of the stack limit), which a million pointers alone pass; a count of 4096 refused the
 * environment of a pod in a namespace with some 600 Services (their links are 7 variables each).
 */
#define MAX_ITEMS (1 << 20)

int tv_string_arg(napi_env env, napi_value value, char *buf, int *present);
int tv_flags_arg(napi_env env, napi_value value, unsigned long *flags);
napi_value tv_errno_value(napi_env env, int err);
int tv_set(napi_env env, napi_value obj, const char *key, napi_status made, const napi_value *value);
int tv_args_with_path(napi_env env, napi_callback_info info, size_t want, napi_value *argv, char *path);
int tv_vector_arg(napi_env env, napi_value value, char ***out);
void tv_free_vector(char **v);
int tv_fd_arg(napi_env env, napi_value value, int min, int *fd);
int tv_fds_arg(napi_env env, napi_value value, int *fds, uint32_t most, uint32_t *n);

napi_value tv_bind_with_flags(napi_env env, napi_callback_info info);
napi_value tv_loop_attach(napi_env env, napi_callback_info info);
napi_value tv_loop_detach(napi_env env, napi_callback_info info);
napi_value tv_loop_refresh(napi_env env, napi_callback_info info);
napi_value tv_close_fd(napi_env env, napi_callback_info info);
napi_value tv_spawn_tool(napi_env env, napi_callback_info info);
napi_value tv_spawn_supported(napi_env env, napi_callback_info info);
napi_value tv_spawn_driver(napi_env env, napi_callback_info info);

#endif
