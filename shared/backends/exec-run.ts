import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { close, fstat, open, readAt, unlink } from '../fs-async.js';
import { nativeMount } from '../native-mount.js';
import { afterLeftOut, envPairs, OUTPUT_CAP, signalQuietly, toolEnv } from '../runner.js';
import { runDriverNatively } from './exec-run-native.js';

/**
 * Runs one third-party FlexVolume driver call: started by the addon's posix_spawn where it can
 * (shared/backends/exec-run-native.ts, with the same rules), else by execa, the one place execa is
 * used. The CSI server and the operator's CLI (`twinvol flex check`, `compare`) reach it; the
 * FlexVolume executable (flex/main.ts) never does, so its start-up stays lean (test/exec/bundle.test.ts
 * checks the bundle).
 *
 * Why not shared/runner.ts: that runner is for twinvol's own tools; a driver is someone else's program
 * that may hang, fork, or leave a daemon behind, and kubelet's contract with it differs (one combined
 * output, the reply judged by its JSON, not its exit code alone).
 *
 * - Output: stdout and stderr both go to ONE unlinked temporary file (the same open file description,
 *   so the two streams interleave in the order written, as Go's CombinedOutput gives kubelet). No pipe
 *   exists for a daemon the driver leaves behind (FUSE helpers do) to hold open, so the call ends when
 *   the driver exits, never when the last holder of a pipe goes.
 * - Deadline: the driver gets SIGTERM, and SIGKILL `graceMs` later (execa's `timeout` and
 *   `forceKillAfterDelay`, or the native path's timers). It leads a session and process group of
 *   its own (execa's `detached`: setsid), and the whole group is killed as soon as the call settles
 *   past its deadline, so nothing it started (a hung `mount`) lives on.
 * - A driver that exits normally keeps what it deliberately left running in its group (a FUSE daemon
 *   serving the mount it just made; killing it would break the mount), but that cannot delay the reply.
 */
export interface DriverRunOptions {
  timeoutMs: number;
  /** After SIGTERM at the deadline, how long before SIGKILL. */
  graceMs: number;
  /** Words put before the driver's path (nsenter for `--flex-exec host`). */
  prefix?: readonly string[];
  /**
   * The driver's whole environment, as kubelet passes its own (`twinvol compare` and `migrate verify`
   * play kubelet in a scratch world). Default: this process's, with the sbin directories on the PATH.
   */
  env?: Readonly<Record<string, string>>;
  /** How the driver is started; by default posix_spawn where the addon can, else execa. */
  spawner?: DriverSpawner;
  /** Told the driver's pid (its process group) as soon as it runs, for a caller that must kill the call midway. */
  onStart?: (pid: number) => void;
}

/** The addon's posix_spawn (shared/backends/exec-run-native.ts), or execa. */
export type DriverSpawner = 'posix_spawn' | 'execa';

export interface DriverRun extends DriverEnded {
  /** Combined stdout and stderr, in order, capped at OUTPUT_CAP bytes. */
  output: string;
  /**
   * The unlinked output file: whatever still holds it open was left running by this call. Its path
   * too, as a freed inode number is soon another file's.
   */
  outputFile: { path: string; dev: number; ino: number };
  durationMs: number;
}

/** How a driver's run ended (or why it never started), whichever spawner ran it. */
export interface DriverEnded {
  /** -1 when killed by a signal or never started. */
  exitCode: number;
  timedOut: boolean;
  /**
   * Set when a signal ended the driver: its name, as execa gives it and the addon's callback
   * numbers it; 'unknown' where an addon built before that passes no number, or Node has no name
   * for it (a real-time signal).
   */
  signal?: NodeJS.Signals | 'unknown';
  /** Why the driver could not be started at all. */
  startError?: string;
  pid?: number;
}

let sequence = 0;

export async function runDriver(executable: string, args: readonly string[], opts: DriverRunOptions): Promise<DriverRun> {
  const started = performance.now();
  const outPath = join(tmpdir(), `twinvol-flex-${process.pid}-${++sequence}-${Math.random().toString(36).slice(2)}.out`);
  // The core's file calls: on the CSI service thread they run on the thread while it serves this call
  // alone, without a round trip through libuv's threadpool for each (shared/fs-async.ts).
  const out = await open(outPath, 'wx+', 0o600);
  try {
    // Unlinked at once: the driver and its descendants write to the open file, which goes with the last fd.
    await unlink(outPath);
    const [file, ...rest] = [...(opts.prefix ?? []), executable, ...args];
    if (file === undefined) throw new Error('no command');
    const native = opts.spawner === 'execa' ? undefined : nativeMount()?.spawnTool;
    const startDriver = native?.supported() ? native.startDriver : undefined;
    if (opts.spawner === 'posix_spawn' && !startDriver) throw new Error('the addon cannot start a driver here');
    const ended = startDriver
      ? await runDriverNatively(startDriver, file, rest, envPairs(opts.env ?? { ...process.env, PATH: toolPath() }), out, opts)
      : await runWithExeca(file, rest, out, opts);
    const { size, dev, ino } = await fstat(out);
    const output = await readTail(out, size);
    return { ...ended, output, outputFile: { path: outPath, dev, ino }, durationMs: performance.now() - started };
  } finally {
    await close(out);
  }
}

async function runWithExeca(file: string, args: readonly string[], outputFd: number, opts: DriverRunOptions): Promise<DriverEnded> {
  const subprocess = execa(file, args, {
    stdin: 'ignore',
    stdout: descriptor(outputFd),
    stderr: descriptor(outputFd),
    detached: true,
    timeout: opts.timeoutMs,
    killSignal: 'SIGTERM',
    forceKillAfterDelay: opts.graceMs,
    reject: false,
    // kubelet runs a driver with its own environment; the PATH gains the sbin directories.
    extendEnv: opts.env === undefined,
    env: opts.env ?? { PATH: toolPath() },
  });
  const pid = subprocess.pid;
  if (pid !== undefined) opts.onStart?.(pid);
  const result = await subprocess;
  // SIGKILL to every process still in the driver's group.
  if (result.timedOut && pid !== undefined) signalQuietly(-pid, 'SIGKILL');
  const spawnFailed = result.failed && result.exitCode === undefined && result.signal === undefined && !result.timedOut;
  return {
    exitCode: result.exitCode ?? -1,
    timedOut: result.timedOut,
    ...(spawnFailed ? { startError: result.shortMessage } : {}),
    ...(result.signal !== undefined ? { signal: result.signal } : {}),
    ...(pid !== undefined ? { pid } : {}),
  };
}

/**
 * execa's types list only the literals 3 to 9 as descriptor numbers, but at run time a single number
 * is handed to child_process.spawn as it is (execa lib/stdio/type.js: "native"), whatever its value.
 */
function descriptor(fd: number): 3 {
  return fd as 3;
}

/** The PATH twinvol's own tools run with (shared/runner.ts toolEnv): the server's, plus the sbin directories. */
function toolPath(): string {
  return toolEnv().PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin';
}

/**
 * What the driver and its descendants wrote: all of it, or past OUTPUT_CAP bytes its last OUTPUT_CAP,
 * after a line that says how many went before, as the runner keeps a tool's (shared/runner.ts). The end, because a driver's reply comes last: kubelet reads the whole output, and a
 * driver that logs megabytes before its reply must still be read leniently (shared/backends/exec-reply.ts).
 */
async function readTail(fd: number, size: number): Promise<string> {
  const length = Math.min(size, OUTPUT_CAP);
  const start = size - length;
  const buf = Buffer.alloc(length);
  let offset = 0;
  while (offset < length) {
    const bytesRead = await readAt(fd, buf, offset, length - offset, start + offset);
    if (bytesRead === 0) break;
    offset += bytesRead;
  }
  return afterLeftOut(buf.subarray(0, offset).toString('utf8'), start);
}
