import { constants } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { getSystemErrorName } from 'node:util';
import { invalidArgument } from './errors.js';
import { RecordLog } from './record-log.js';
import { SPAWN_LOG_LIMIT } from './runner.js';

/**
 * mount(2) and umount2(2) (here, or on libuv's threadpool), statx(2)'s mount-root bit and
 * statmount(2) (the last two for shared/mountinfo.ts), a loop device's LOOP_CONFIGURE,
 * LOOP_CLR_FD and LOOP_SET_CAPACITY, and posix_spawn(3) for the CSI server's tools
 * (shared/spawn-native.ts) and third-party drivers (shared/backends/exec-run-native.ts), from
 * native/*.c, built by `npm ci` (scripts/build-native.mjs) and put beside the CSI server and the
 * FlexVolume executable by the build (dist/csi/twinvol-mount.node, dist/flex/). Spawning mount(8)
 * for a bind mount forks the process and execs a tool, about 2 ms each way and the busiest part of a
 * dir volume's NodePublishVolume and NodeUnpublishVolume; the system call takes tens of microseconds.
 *
 * A fast path only (shared/mounter.ts): where the addon is missing (a machine that could not build
 * it, an executable without it beside), or a call fails, the same step goes through mount(8),
 * umount(8) or losetup, whose wording every error already carries.
 */
export interface NativeMount {
  /** 0, or the errno mount(2) failed with (-1: the addon answered something else). */
  mount(source: string | null, target: string, fsType: string | null, flags: number, data: string | null): number;
  /** 0, or the errno umount2(2) failed with. */
  umount(target: string, flags: number): number;
  /**
   * mount and umount made on libuv's threadpool, for a filesystem's mount or unmount, which may wait
   * on the disk (a journal replayed, written data flushed): a promise of the errno. Absent in an
   * addon built before it had these.
   */
  mountAsync?: (source: string | null, target: string, fsType: string | null, flags: number, data: string | null) => Promise<number>;
  umountAsync?: (target: string, flags: number) => Promise<number>;
  /**
   * statx(2)'s STATX_ATTR_MOUNT_ROOT of the path, its last part not followed: true or false, or
   * undefined when it cannot say (the call failed, a kernel before 5.8, an addon built before it had this).
   */
  mountRoot(path: string): boolean | undefined;
  /**
   * The mount on top at the path (its last part not followed), from statx(2)'s unique mount id and
   * statmount(2); where the path is no mount's root, the mount it lies on. Undefined when it cannot
   * say (a kernel before 6.8, statmount refused by a seccomp filter, an addon built before it had this).
   */
  topMount(path: string): MountIds | undefined;
  /**
   * A non-recursive bind of `source` onto the directory or file open as `targetFd`, with the mount(2)
   * flags `set` added to its source mount's and `clear` taken off, made in one step (native/bind.c):
   * 0, or the errno of the step that failed, nothing mounted. Absent in an addon built before it had this.
   */
  bindWithFlags?: (source: string, targetFd: number, set: number, clear: number) => number;
  /**
   * A free loop device bound to the image file (LOOP_CONFIGURE), left open until `close`; or the
   * errno it failed with (-1: the addon answered something else). With `autoclear` the kernel lets
   * the device go at its last close; with `readOnly` it refuses every write (an addon built before
   * that refuses the call, EINVAL). Absent in an addon built before it had this.
   */
  loopAttach?: (image: string, autoclear: boolean, readOnly?: boolean) => LoopAttached | number;
  /** LOOP_CLR_FD on the device: 0, or the errno. Absent in an addon built before it had this. */
  loopDetach?: (device: string) => number;
  /** LOOP_SET_CAPACITY on the device: 0, or the errno. Absent in an addon built before it had this. */
  loopRefresh?: (device: string) => number;
  /** Tools started by posix_spawn (native/spawn.c). Absent in an addon built before it had this. */
  spawnTool?: NativeSpawn;
  readonly MS_RDONLY: number;
  readonly MS_NOSUID: number;
  readonly MS_NODEV: number;
  readonly MS_NOEXEC: number;
  readonly MS_NOATIME: number;
  readonly MS_NODIRATIME: number;
  readonly MS_RELATIME: number;
  readonly MS_STRICTATIME: number;
  readonly MS_REMOUNT: number;
  readonly MS_BIND: number;
  readonly UMOUNT_NOFOLLOW: number;
  /** For shared/bind-by-move.ts; absent in an addon built before it had them (OPTIONAL_NUMBERS): mount(8) then. */
  readonly MS_MOVE?: number;
  readonly MS_PRIVATE?: number;
}

/** native/spawn.c: a tool started without a fork, watched on the calling thread's event loop. */
export interface NativeSpawn {
  /** Whether this kernel lets a started tool be watched (pidfd_open(2), Linux 5.3). */
  supported(): boolean;
  /**
   * Starts `file` (looked up on the PATH of `env`, `KEY=value` strings) with `argv`, stdin on
   * /dev/null, `extraFds` as its fd 3 and on: its pid, or the errno it could not be started with.
   * `onExit` is called once, when it exits, with the latest `cap` bytes (at least) of each stream.
   */
  start(file: string, argv: readonly string[], env: readonly string[], extraFds: readonly number[], cap: number, onExit: (exit: ToolExit) => void): { pid: number } | { errno: number };
  /**
   * Starts a third-party FlexVolume driver as `start` starts a tool, but with `outputFd` as both its
   * stdout and stderr, leading a session and process group of its own (its pid is the group's id).
   * `onExit` gets its exit code, null when a signal ended it. Absent in an addon built before it had this.
   */
  startDriver?(file: string, argv: readonly string[], env: readonly string[], outputFd: number, onExit: (code: number | null, signal?: NodeJS.Signals | 'unknown') => void): { pid: number } | { errno: number };
}

/** How a natively started tool ended, and what it wrote. */
export interface ToolExit {
  /** Its exit code; null when a signal ended it. */
  code: number | null;
  /** The signal that ended it, by name; 'unknown' where the addon (built before it said) or the number does not tell. */
  signal?: NodeJS.Signals | 'unknown';
  stdout: Buffer;
  /** How many bytes of stdout were written before those kept. */
  stdoutDropped: number;
  stderr: Buffer;
  stderrDropped: number;
}

/** native/spawn.c's callback arguments, read: (code | null, stdout, dropped, stderr, dropped, signal number | null). */
function toolExit(args: unknown[]): ToolExit {
  const [code, stdout, stdoutDropped, stderr, stderrDropped, signal] = args;
  const count = (n: unknown) => (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : 0);
  const bytes = (b: unknown) => (Buffer.isBuffer(b) ? b : Buffer.alloc(0));
  const exitCode = typeof code === 'number' && Number.isInteger(code) ? code : null;
  return {
    code: exitCode,
    ...(exitCode === null ? { signal: signalName(signal) } : {}),
    stdout: bytes(stdout),
    stdoutDropped: count(stdoutDropped),
    stderr: bytes(stderr),
    stderrDropped: count(stderrDropped),
  };
}

/** A signal's number as Node names it; 'unknown' for one it has no name for (the real-time ones) or no number. */
function signalName(n: unknown): NodeJS.Signals | 'unknown' {
  if (typeof n !== 'number') return 'unknown';
  const named = Object.entries(constants.signals).find(([, number]) => number === n);
  return named ? (named[0] as NodeJS.Signals) : 'unknown';
}

/** The addon's spawnTool, spawnSupported and (optional) spawnDriver, typed; undefined when it lacks either of the first two. */
function nativeSpawn(spawnTool: unknown, spawnSupported: unknown, spawnDriver: unknown): NativeSpawn | undefined {
  if (typeof spawnTool !== 'function' || typeof spawnSupported !== 'function') return undefined;
  // The kernel's answer does not change in a process's life: asked once, not at every driver call.
  let supported: boolean | undefined;
  return {
    supported: () => (supported ??= spawnSupported() === 0),
    start: (file, argv, env, extraFds, cap, onExit) => pidAnswer(spawnTool(file, argv, env, extraFds, cap, (...args: unknown[]) => onExit(toolExit(args)))),
    ...(typeof spawnDriver === 'function'
      ? {
          startDriver: (file: string, argv: readonly string[], env: readonly string[], outputFd: number, onExit: (code: number | null, signal?: NodeJS.Signals | 'unknown') => void) =>
            pidAnswer(
              spawnDriver(file, argv, env, outputFd, (...args: unknown[]) => {
                const exit = toolExit(args);
                onExit(exit.code, exit.signal);
              }),
            ),
        }
      : {}),
  };
}

/** A start's answer: a pid (a positive integer), else the errno it is the negative of; anything else, unreadable. */
function pidAnswer(answer: unknown): { pid: number } | { errno: number } {
  if (typeof answer !== 'number' || !Number.isInteger(answer) || answer === 0) return { errno: -1 };
  return answer > 0 ? { pid: answer } : { errno: -answer };
}

/** A mount as /proc/self/mountinfo names it: its id, its parent's id, and where it is mounted. */
export interface MountIds {
  id: number;
  parentId: number;
  mountPoint: string;
}

/** A loop device the addon bound, held open until the caller closes it. */
export interface LoopAttached {
  device: string;
  close(): void;
}

/** The file name the build gives the addon beside the server (scripts/build.mjs). */
export const NATIVE_MOUNT_FILE = 'twinvol-mount.node';

const FUNCTIONS = ['mount', 'umount'] as const;
const NUMBERS = ['MS_RDONLY', 'MS_NOSUID', 'MS_NODEV', 'MS_NOEXEC', 'MS_NOATIME', 'MS_NODIRATIME', 'MS_RELATIME', 'MS_STRICTATIME', 'MS_REMOUNT', 'MS_BIND', 'UMOUNT_NOFOLLOW'] as const;
const OPTIONAL_NUMBERS = ['MS_MOVE', 'MS_PRIVATE'] as const;

type Flags = { [K in (typeof NUMBERS)[number]]: number };

/** An errno as the addon answers it: anything but a small integer is a broken addon, so a failure. */
const errnoOf = (answer: unknown): number => (Number.isInteger(answer) && (answer as number) >= 0 ? (answer as number) : -1);

/** native/mount.c's mountRoot answers 1, 0, or a negative errno: only the first two say anything. */
const rootAnswer = (answer: unknown): boolean | undefined => (answer === 1 ? true : answer === 0 ? false : undefined);

/** native/mount.c's topMount answers an object of two ids and a path, or a negative errno (undefined). */
function topMountAnswer(answer: unknown): MountIds | undefined {
  if (typeof answer !== 'object' || answer === null) return undefined;
  const { id, parentId, mountPoint } = answer as Record<string, unknown>;
  const isId = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 0;
  return isId(id) && isId(parentId) && typeof mountPoint === 'string' ? { id, parentId, mountPoint } : undefined;
}

/**
 * native/loop.c's loopAttach answers { device, fd } or a negative errno: anything else is -1. The
 * descriptor is closed by the addon's closeFd: Node's own close warns on a worker thread about a
 * descriptor it did not open.
 */
function loopAnswer(answer: unknown, closeFd: (fd: number) => unknown): LoopAttached | number {
  if (typeof answer === 'number') return Number.isInteger(answer) && answer < 0 ? -answer : -1;
  if (typeof answer !== 'object' || answer === null) return -1;
  const { device, fd } = answer as Record<string, unknown>;
  if (typeof fd !== 'number' || !Number.isInteger(fd) || fd < 0) return -1;
  if (typeof device === 'string' && /^\/dev\/loop\d+$/.test(device)) {
    // Once only: a second close(2) of the number could close whatever file was given it since.
    let open = true;
    const close = (): void => {
      if (!open) return;
      open = false;
      closeFd(fd);
    };
    return { device, close };
  }
  // A device this does not know what to do with is let go, not left open.
  closeFd(fd);
  return -1;
}

/** What a loaded addon exports, checked rather than trusted: a stale or foreign file is not used. */
export function parseAddon(exports: unknown): NativeMount | undefined {
  if (typeof exports !== 'object' || exports === null) return undefined;
  const e = new Map(Object.entries(exports));
  const [mount, umount] = FUNCTIONS.map((f) => e.get(f));
  if (typeof mount !== 'function' || typeof umount !== 'function') return undefined;
  // Optional: an addon an older install left beside a newer executable has no such function, and still mounts.
  const root = e.get('mountRoot');
  const mountRoot = typeof root === 'function' ? (path: string) => rootAnswer(root(path)) : () => undefined;
  const top = e.get('topMount');
  const topMount = typeof top === 'function' ? (path: string) => topMountAnswer(top(path)) : () => undefined;
  const [attach, detach, refresh, closeFd, mountAsync, umountAsync, bindWithFlags] = ['loopAttach', 'loopDetach', 'loopRefresh', 'closeFd', 'mountAsync', 'umountAsync', 'bindWithFlags'].map((f) => e.get(f));
  const spawnTool = nativeSpawn(e.get('spawnTool'), e.get('spawnSupported'), e.get('spawnDriver'));
  const flags: Partial<Flags> = {};
  for (const n of NUMBERS) {
    const value = e.get(n);
    if (typeof value !== 'number' || !Number.isInteger(value)) return undefined;
    flags[n] = value;
  }
  const optionalFlags: { MS_MOVE?: number; MS_PRIVATE?: number } = {};
  for (const [n, v] of OPTIONAL_NUMBERS.map((n) => [n, e.get(n)] as const)) if (typeof v === 'number' && Number.isInteger(v) && v > 0) optionalFlags[n] = v;
  return {
    ...(flags as Flags),
    ...optionalFlags,
    mount: (...args) => errnoOf(mount(...args)),
    umount: (...args) => errnoOf(umount(...args)),
    mountRoot,
    topMount,
    // An answer is awaited, not trusted to be a promise: a number (bad arguments) or anything else awaits as itself.
    ...(typeof mountAsync === 'function' ? { mountAsync: async (...args: unknown[]) => errnoOf(await Reflect.apply(mountAsync, undefined, args)) } : {}),
    ...(typeof umountAsync === 'function' ? { umountAsync: async (...args: unknown[]) => errnoOf(await Reflect.apply(umountAsync, undefined, args)) } : {}),
    ...(typeof attach === 'function' && typeof closeFd === 'function'
      ? {
          // Two arguments unless read-only is asked: an older addon takes exactly two, and still binds.
          loopAttach: (image: string, autoclear: boolean, readOnly = false) =>
            loopAnswer(readOnly ? attach(image, autoclear, true) : attach(image, autoclear), (fd) => closeFd(fd)),
        }
      : {}),
    ...(typeof bindWithFlags === 'function' ? { bindWithFlags: (...args: [string, number, number, number]) => errnoOf(bindWithFlags(...args)) } : {}),
    ...(typeof detach === 'function' ? { loopDetach: (device: string) => errnoOf(detach(device)) } : {}),
    ...(typeof refresh === 'function' ? { loopRefresh: (device: string) => errnoOf(refresh(device)) } : {}),
    ...(spawnTool ? { spawnTool } : {}),
  };
}

/**
 * Where an entry point's addon is: beside its own file (`file`, the bundle's __filename), or beside
 * the single executable; null when TWINVOL_NATIVE_MOUNT=off asks for mount(8) and umount(8) alone.
 * A missing file is found out at the first mount, which then spawns the tool. Any other value than
 * on or off is refused: a mistyped "0" must not leave the addon in use behind the operator's back.
 */
export function nativeMountBeside(file: string): string | null {
  const asked = process.env.TWINVOL_NATIVE_MOUNT;
  if (asked === 'off') return null;
  if (asked !== undefined && asked !== '' && asked !== 'on')
    throw invalidArgument(`TWINVOL_NATIVE_MOUNT must be on or off, not ${JSON.stringify(asked.slice(0, 32))}`);
  const sea = process.getBuiltinModule('node:sea').isSea();
  return join(dirname(sea ? process.execPath : file), NATIVE_MOUNT_FILE);
}

/** Defined (true) by the build in every bundle (scripts/build.mjs); absent when run from source. */
declare const __TWINVOL_BUNDLED__: boolean | undefined;

/** Where to look: set by an entry point that must say (setNativeMountPath), else `defaultPath`. */
let addonPath: string | null | undefined;
let loaded: NativeMount | null | undefined;

/**
 * Tells the core where the addon is, for code with no file of its own to look beside (the CSI
 * server's service thread runs source text); null: mounts go through mount(8) only; undefined: back
 * to `defaultPath`. Called before the first mount.
 */
export function setNativeMountPath(path: string | null | undefined): void {
  addonPath = path;
  loaded = undefined;
}

/**
 * The checkout's build (build/Release), from this module's place in the source tree: what the tests
 * run. In a bundle this path leads nowhere, and the entry point says where to look instead.
 */
function checkoutBuild(): string | undefined {
  try {
    return fileURLToPath(new URL('../build/Release/twinvol_mount.node', import.meta.url));
  } catch {
    return undefined;
  }
}

/**
 * Where the addon is when no entry point said: in a bundle, beside the bundle's own file (the packed
 * FlexVolume dispatcher and CLI are given the executable's __filename: flex/packed-modules.ts), so a
 * FlexVolume call does nothing about it until it mounts; run from source, the checkout's build.
 */
function defaultPath(): string | null | undefined {
  return typeof __TWINVOL_BUNDLED__ !== 'undefined' ? nativeMountBeside(__filename) : checkoutBuild();
}

/**
 * The addon, loaded once; undefined where there is none (mount(8) is always there). Throws only for
 * a TWINVOL_NATIVE_MOUNT that is neither on nor off (nativeMountBeside), and then every time.
 */
export function nativeMount(): NativeMount | undefined {
  if (loaded === undefined) {
    const path = addonPath === undefined ? defaultPath() : addonPath;
    loaded = null;
    if (path) {
      try {
        const module = { exports: {} as unknown };
        process.dlopen(module, path);
        loaded = parseAddon(module.exports) ?? null;
      } catch {
        // Not there, or not loadable here (another architecture, another Node ABI): mount(8) it is.
      }
    }
  }
  return loaded ?? undefined;
}

/**
 * One mount made or undone, or loop device bound or let go, as a system call, kept and told like a
 * spawned tool (shared/runner.ts recordSpawn) so the CSI server's debug log and metrics, and the
 * FlexVolume call's log line, still show every mount and device a call made, though no process ran.
 */
export interface SystemCallRecord {
  /** move_mount: a bind made with its flags, by open_tree, mount_setattr and move_mount (native/bind.c). */
  call: 'mount' | 'move_mount' | 'umount2' | 'ioctl';
  /** A mount's source. */
  source?: string;
  /** A filesystem mount's type. */
  fsType?: string;
  /**
   * The path as the caller named it, not the pinned descriptor's /proc/self/fd path the call was
   * given; for a loop device's ioctl, the image bound or the device let go.
   */
  target: string;
  /** mount(8)'s words for the flags (bind, remount, ro, ...; nofollow for umount2); an ioctl's request and flags. */
  options: readonly string[];
  /** Absent on success; else the errno's name, and mount(8) or umount(8) takes the step (recorded as a command). */
  error?: string;
  durationMs: number;
}

const systemCalls = new RecordLog<SystemCallRecord>(SPAWN_LOG_LIMIT);

/** The latest system calls this process made (as many as shared/runner.ts keeps spawns), in order. */
export function systemCallLog(): readonly SystemCallRecord[] {
  return systemCalls.latest();
}

export function observeSystemCalls(observer: (record: SystemCallRecord) => void): () => void {
  return systemCalls.observe(observer);
}

/** A system call as its caller describes it, before it is made: its record without the outcome. */
export type CallMade = Omit<SystemCallRecord, 'error' | 'durationMs'>;

/** Makes one call of the addon's (`invoke` answers an errno) and records it: true when it succeeded. */
export function callNatively(what: CallMade, invoke: () => number): boolean {
  // process.hrtime, not performance, as in shared/runner.ts: the global loads perf_hooks.
  const started = process.hrtime.bigint();
  return recordCall(what, invoke(), started);
}

/** callNatively for a call made on the threadpool (`invoke` promises an errno). */
export async function callNativelyAsync(what: CallMade, invoke: () => Promise<number>): Promise<boolean> {
  const started = process.hrtime.bigint();
  return recordCall(what, await invoke(), started);
}

function recordCall(what: CallMade, errno: number, started: bigint): boolean {
  const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
  // -1 is the addon answering something that is no errno (errnoOf above).
  const error = errno === 0 ? undefined : errno > 0 ? getSystemErrorName(-errno) : 'no errno';
  systemCalls.add({ ...what, ...(error === undefined ? {} : { error }), durationMs });
  return errno === 0;
}
