/*
 * A tool started with posix_spawn(3) and watched on the calling thread's libuv loop: its exit
 * through a pidfd, its stdout and stderr through pipes read as they fill. Why: libuv's spawn forks,
 * and a fork copies the page tables of the whole process, so it costs in proportion to the process's
 * size (fork and exec of /bin/true here: 2.4 ms from a 45 MiB process, 5.6 ms from 146 MiB, 16 ms
 * from 447 MiB), and leaves every page of the parent copy-on-write until the child has exec'd.
 * glibc's posix_spawn clones with CLONE_VM | CLONE_VFORK: nothing is copied, and the call costs
 * 0.5 ms whatever the size (/tmp/s15/ps.c, scratch). shared/spawn-native.ts uses it in the CSI server.
 *
 * The rules are the runner's (shared/runner.ts spawnCaptured): no shell, stdin on /dev/null, the
 * request's environment (and its PATH to find the tool), the latest `cap` bytes of each stream kept
 * and the rest counted, and an answer when the tool EXITS: a daemon it left holding a pipe does not
 * hold the call (what is in the pipe at the exit is read, then the pipes are let go).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>
#include "addon.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* At most this many extra descriptors: the runner passes one, fd 3. */
#define MAX_EXTRA_FDS 4
/* A stream keeps up to twice its cap, then drops all but the latest cap bytes at once. */
#define FIRST_BUFFER 4096
/* How much of a stream one turn of the loop reads. */
#define READ_BUDGET (1 << 20)

struct child;

struct capture {
  uv_poll_t poll;
  /* -1 when the stream could not be watched (it is then let go, and answers empty) */
  int fd;
  char *buf;
  size_t len, size, dropped;
  struct child *child;
};

struct child {
  napi_env env;
  napi_ref callback;
  napi_async_context context;
  napi_async_cleanup_hook_handle hook;
  pid_t pid;
  int pidfd;
  uv_poll_t exited;
  struct capture out[2];
  size_t cap;
  int handles_open;
  int releasing;
};

static int pidfd_open(pid_t pid) {
  return (int)syscall(SYS_pidfd_open, pid, 0);
}

/*
 * Reads what the pipe holds into the stream's buffer, at most `budget` bytes: 1 at its end (or an
 * error), else 0. The budget gives the loop back to the thread's other calls (and to the tool's
 * deadline) however fast a tool writes; the poll, level-triggered, calls again for the rest.
 */
static int drain(struct capture *c, size_t budget) {
  while (budget) {
    if (c->len == c->size) {
      size_t most = 2 * c->child->cap;
      if (c->size < most) {
        size_t size = c->size ? 2 * c->size : FIRST_BUFFER;
        char *grown = realloc(c->buf, size < most ? size : most);
        if (!grown) return 1;
        c->buf = grown;
        c->size = size < most ? size : most;
      } else {
        memmove(c->buf, c->buf + c->len - c->child->cap, c->child->cap);
        c->dropped += c->len - c->child->cap;
        c->len = c->child->cap;
      }
    }
    size_t room = c->size - c->len;
    ssize_t n = read(c->fd, c->buf + c->len, room < budget ? room : budget);
    if (n > 0) {
      c->len += (size_t)n;
      budget -= (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && errno == EAGAIN ? 0 : 1;
    }
  }
  return 0;
}

/* What the pipe holds now, and no more: at the exit, a daemon still writing to it is not waited for. */
static void drain_held(struct capture *c) {
  int held = 0;
  if (c->fd >= 0 && ioctl(c->fd, FIONREAD, &held) == 0 && held > 0) drain(c, (size_t)held);
}

static void on_output(uv_poll_t *poll, int status, int events) {
  (void)events;
  struct capture *c = poll->data;
  /* At the stream's end the poll stops: a pipe at its end is readable for ever. */
  if (status < 0 || drain(c, READ_BUDGET)) uv_poll_stop(poll);
}

static void closed(struct child *ch) {
  if (--ch->handles_open) return;
  close(ch->pidfd);
  for (int i = 0; i < 2; i++) {
    if (ch->out[i].fd >= 0) close(ch->out[i].fd);
    free(ch->out[i].buf);
  }
  napi_delete_reference(ch->env, ch->callback);
  napi_async_destroy(ch->env, ch->context);
  napi_remove_async_cleanup_hook(ch->hook);
  free(ch);
}

static void on_exit_closed(uv_handle_t *handle) {
  closed(handle->data);
}

static void on_output_closed(uv_handle_t *handle) {
  closed(((struct capture *)handle->data)->child);
}

/* Stops watching and closes the handles; the last one closed frees the child's record. */
static void release(struct child *ch) {
  if (ch->releasing) return;
  ch->releasing = 1;
  uv_poll_stop(&ch->exited);
  uv_close((uv_handle_t *)&ch->exited, on_exit_closed);
  for (int i = 0; i < 2; i++) {
    if (ch->out[i].fd < 0) continue;
    uv_poll_stop(&ch->out[i].poll);
    uv_close((uv_handle_t *)&ch->out[i].poll, on_output_closed);
  }
}

/* callback(code | null (a signal ended it), stdout, its bytes dropped, stderr, its bytes dropped, the signal | null) */
static void answer(struct child *ch, const siginfo_t *info) {
  napi_env env = ch->env; napi_handle_scope scope;
  napi_value callback, global, result, err, argv[6]; /* argv[5]: the signal's number, for "killed by SIGSEGV" */
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  bool exited = info && info->si_code == CLD_EXITED, signalled = info && (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED);
  int made = exited ? napi_create_int32(env, info->si_status, &argv[0]) == napi_ok : napi_get_null(env, &argv[0]) == napi_ok;
  made = made && (signalled ? napi_create_int32(env, info->si_status, &argv[5]) == napi_ok : napi_get_null(env, &argv[5]) == napi_ok);
  for (int i = 0; i < 2; i++) {
    struct capture *c = &ch->out[i];
    made = made && napi_create_buffer_copy(env, c->len, c->len ? c->buf : "", NULL, &argv[1 + 2 * i]) == napi_ok &&
           napi_create_double(env, (double)c->dropped, &argv[2 + 2 * i]) == napi_ok;
  }
  made = made && napi_get_reference_value(env, ch->callback, &callback) == napi_ok && callback && napi_get_global(env, &global) == napi_ok;
  /* An answer that cannot be made ends the process, as V8 does out of memory, rather than leave the call waiting
     forever; a throw, in the callback or pending here, is raised as uncaught, as in any other event's callback. */
  bool pending = false;
  if (made) napi_make_callback(env, ch->context, global, callback, 6, argv, &result);
  else if (napi_is_exception_pending(env, &pending) != napi_ok || !pending)
    napi_fatal_error("twinvol spawn", NAPI_AUTO_LENGTH, "cannot give a tool's exit to JavaScript (out of memory)", NAPI_AUTO_LENGTH);
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending && napi_get_and_clear_last_exception(env, &err) == napi_ok) napi_fatal_exception(env, err);
  napi_close_handle_scope(env, scope);
}

static void on_tool_exit(uv_poll_t *poll, int status, int events) {
  (void)status;
  (void)events;
  struct child *ch = poll->data;
  siginfo_t info;
  int r;
  memset(&info, 0, sizeof info);
  do r = waitid(P_PID, (id_t)ch->pid, &info, WEXITED | WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == 0 && info.si_pid == 0) return; /* readable before the exit is reapable: wait on */
  for (int i = 0; i < 2; i++) drain_held(&ch->out[i]);
  answer(ch, r == 0 ? &info : NULL);
  release(ch);
}

/* The thread's environment ends (the CSI server's service thread stops) with a tool running: no answer, no zombie left watched. */
static void on_teardown(napi_async_cleanup_hook_handle handle, void *arg) {
  (void)handle;
  release(arg);
}

/*
 * posix_spawn of `file`, or where it has no slash, of the first executable of that name on the PATH
 * the tool's own environment gives (as execvp, and libuv, look it up): the pid, or an errno.
 */
static int start(const char *file, char **argv, char **envp, const posix_spawn_file_actions_t *actions, const posix_spawnattr_t *attr, pid_t *pid) {
  if (strchr(file, '/')) return posix_spawn(pid, file, actions, attr, argv, envp);
  const char *path = "/usr/bin:/bin";
  for (char **e = envp; *e; e++)
    if (!strncmp(*e, "PATH=", 5)) path = *e + 5;
  int err = ENOENT;
  char candidate[MAX_STRING];
  for (const char *dir = path; dir; dir = strchr(dir, ':') ? strchr(dir, ':') + 1 : NULL) {
    size_t len = strcspn(dir, ":");
    if (len == 0 || len + 1 + strlen(file) >= sizeof candidate) continue;
    memcpy(candidate, dir, len);
    candidate[len] = '/';
    strcpy(candidate + len + 1, file);
    if (access(candidate, X_OK)) {
      if (errno == EACCES) err = EACCES;
      continue;
    }
    int r = posix_spawn(pid, candidate, actions, attr, argv, envp);
    if (r != ENOENT && r != ENOTDIR && r != EACCES) return r;
    if (r == EACCES) err = EACCES;
  }
  return err;
}

/*
 * The child's descriptors (0 on /dev/null, `out_w` on 1 and 2, then the extra ones), signals (all
 * default, none blocked) and, if `session`, a session of its own (setsid: it leads a new process
 * group too, and has no controlling terminal), as libuv makes a `detached` child.
 */
static int spawn_tool(const char *file, char **argv, char **envp, const int *extra, uint32_t nextra, const int out_w[2], int session, pid_t *pid) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  sigset_t none, all;
  int err = posix_spawn_file_actions_init(&actions);
  if (err) return err;
  if ((err = posix_spawnattr_init(&attr))) {
    posix_spawn_file_actions_destroy(&actions);
    return err;
  }
  sigemptyset(&none);
  sigfillset(&all);
  /* Node ignores SIGPIPE and a thread may block signals: the tool starts with neither. */
  err = posix_spawnattr_setsigmask(&attr, &none);
  if (!err) err = posix_spawnattr_setsigdefault(&attr, &all);
  if (!err) err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (session ? POSIX_SPAWN_SETSID : 0));
  if (!err) err = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  for (int i = 0; i < 2 && !err; i++) err = posix_spawn_file_actions_adddup2(&actions, out_w[i], i + 1);
  for (uint32_t i = 0; i < nextra && !err; i++) err = posix_spawn_file_actions_adddup2(&actions, extra[i], 3 + (int)i);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  /* Every descriptor of the server is close-on-exec already; this is the rule, not the hope. */
  if (!err) err = posix_spawn_file_actions_addclosefrom_np(&actions, 3 + (int)nextra);
#endif
  if (!err) err = start(file, argv, envp, &actions, &attr, pid);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  return err;
}

/*
 * Watches a started tool, keeping `cap` bytes of each of its `nout` piped streams (2, or 0 when it
 * writes to a file): 0, or an errno (the tool is then killed and reaped here).
 */
static int watch(napi_env env, napi_value callback, pid_t pid, const int *out_r, int nout, size_t cap) {
  uv_loop_t *loop = NULL;
  napi_value name;
  struct child *ch = calloc(1, sizeof *ch);
  int pidfd = pidfd_open(pid);
  int err = pidfd < 0 ? errno : !ch ? ENOMEM : 0;
  if (!err && napi_get_uv_event_loop(env, &loop) != napi_ok) err = EINVAL;
  if (!err && uv_poll_init(loop, &ch->exited, pidfd)) err = EIO;
  if (err) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (pidfd >= 0) close(pidfd);
    for (int i = 0; i < nout; i++) close(out_r[i]);
    free(ch);
    return err;
  }
  ch->env = env;
  ch->pid = pid;
  ch->pidfd = pidfd;
  ch->cap = cap;
  ch->exited.data = ch;
  ch->handles_open = 1;
  for (int i = 0; i < 2; i++) {
    struct capture *c = &ch->out[i];
    c->child = ch;
    c->fd = i < nout ? out_r[i] : -1;
    c->poll.data = c;
    if (c->fd < 0) continue;
    if (uv_poll_init(loop, &c->poll, c->fd)) {
      close(c->fd);
      c->fd = -1;
      continue;
    }
    ch->handles_open++;
    uv_poll_start(&c->poll, UV_READABLE, on_output);
  }
  napi_create_reference(env, callback, 1, &ch->callback);
  napi_create_string_utf8(env, "twinvol:spawn", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &ch->context);
  napi_add_async_cleanup_hook(env, on_teardown, ch, &ch->hook);
  uv_poll_start(&ch->exited, UV_READABLE, on_tool_exit);
  return 0;
}

/* Whether a tool started here can be watched: 0 where pidfd_open(2) works (Linux 5.3), else its errno. */
napi_value tv_spawn_supported(napi_env env, napi_callback_info info) {
  (void)info;
  int fd = pidfd_open(getpid());
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) close(fd);
  return tv_errno_value(env, err);
}

static int pipes(int out_r[2], int out_w[2]) {
  for (int i = 0; i < 2; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC)) {
      for (int j = 0; j < i; j++) close(out_r[j]), close(out_w[j]);
      return errno;
    }
    /* Only this end is non-blocking: the tool's end stays as tools expect their stdout. */
    fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    out_r[i] = p[0];
    out_w[i] = p[1];
  }
  return 0;
}

/* The command both starts take first: a file, its argv (at least argv[0]) and its environment. */
static int command_args(napi_env env, napi_value *args, char *file, char ***argv, char ***envp) {
  int present = 0;
  int err = tv_string_arg(env, args[0], file, &present);
  if (!err && !present) err = EINVAL;
  if (!err) err = tv_vector_arg(env, args[1], argv);
  if (!err && !(*argv)[0]) err = EINVAL;
  if (!err) err = tv_vector_arg(env, args[2], envp);
  return err;
}

/*
 * spawnTool(file, argv, env, extraFds, cap, callback): the tool's pid, or a negative errno when it
 * could not be started (bad arguments: EINVAL, E2BIG, EBADF, ENAMETOOLONG). The callback is called
 * once, at the exit.
 */
napi_value tv_spawn_tool(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value args[6];
  char file[MAX_STRING], **argv = NULL, **envp = NULL;
  int extra[MAX_EXTRA_FDS], out_r[2], out_w[2], err;
  uint32_t nextra = 0;
  int64_t cap = 0;
  napi_valuetype type;
  pid_t pid = 0;
  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok || argc != 6) return tv_errno_value(env, -EINVAL);
  err = command_args(env, args, file, &argv, &envp);
  if (!err) err = tv_fds_arg(env, args[3], extra, MAX_EXTRA_FDS, &nextra);
  if (!err && (napi_get_value_int64(env, args[4], &cap) != napi_ok || cap < 1 || cap > (1 << 30))) err = EINVAL;
  if (!err && (napi_typeof(env, args[5], &type) != napi_ok || type != napi_function)) err = EINVAL;
  if (!err) err = pipes(out_r, out_w);
  if (!err) {
    err = spawn_tool(file, argv, envp, extra, nextra, out_w, 0, &pid);
    for (int i = 0; i < 2; i++) close(out_w[i]);
    if (err)
      for (int i = 0; i < 2; i++) close(out_r[i]);
    else
      err = watch(env, args[5], pid, out_r, 2, (size_t)cap);
  }
  tv_free_vector(argv);
  tv_free_vector(envp);
  return tv_errno_value(env, err ? -err : pid);
}

/*
 * spawnDriver(file, argv, env, outputFd, callback): a third-party FlexVolume driver
 * (shared/backends/exec-run-native.ts), started as spawnTool starts a tool but with `outputFd` (an
 * open file) as its stdout and stderr, as kubelet's combined output, and leading a session and
 * process group of its own: a deadline can end all it started, and run from a terminal (`twinvol
 * flex check`) it cannot read it, or be stopped for trying. Its pid, or a negative errno; the
 * callback is called once, at its exit, as spawnTool's (with both streams empty).
 */
napi_value tv_spawn_driver(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value args[5];
  char file[MAX_STRING], **argv = NULL, **envp = NULL;
  int out[2], err;
  int fd = -1;
  napi_valuetype type;
  pid_t pid = 0;
  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok || argc != 5) return tv_errno_value(env, -EINVAL);
  err = command_args(env, args, file, &argv, &envp);
  if (!err) err = tv_fd_arg(env, args[3], 3, &fd);
  if (!err && (napi_typeof(env, args[4], &type) != napi_ok || type != napi_function)) err = EINVAL;
  out[0] = out[1] = fd;
  if (!err) err = spawn_tool(file, argv, envp, NULL, 0, out, 1, &pid);
  if (!err) err = watch(env, args[4], pid, NULL, 0, 1);
  tv_free_vector(argv);
  tv_free_vector(envp);
  return tv_errno_value(env, err ? -err : pid);
}
