import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { getSystemErrorName } from 'node:util';
import { internal } from './errors.js';
import { type Captured, envPairs, keptOutput, setSpawner, spawnHere, type SpawnRequest } from './runner.js';

/**
 * Tools run to their exit with the calling thread blocked, for a process that has nothing else to do
 * meanwhile: a FlexVolume call (flex/dispatch.ts). The runner's own way (shared/runner.ts
 * spawnCaptured) loads node:child_process, and with it net, streams and sockets for the pipes. A
 * `node -e` that spawns /bin/true that way took 57.4 ms against 42.3 for `node -e 0`, and 44.7 ms
 * this way; the FlexVolume dir `mount` went from 2.24x to 1.89x of `node -e 0` (scripts/bench/flex.mjs).
 *
 * Output goes to two unnamed files (O_TMPFILE), not pipes: a synchronous spawn waits until every
 * copy of a pipe is closed, so a daemon a mount helper left behind holding one would hold the call
 * until its deadline and turn a success into a timeout, which is the very thing spawnCaptured's
 * settle-on-exit avoids. A file is read once the tool has exited, whoever still holds it.
 *
 * A tool that walks a volume's data (RunOptions.lengthy: mkfs, e2fsck, resize2fs, cp) still runs
 * the runner's way: a call blocked for minutes would not refresh its locks, and a host sharing the
 * data root takes over a lock left unrefreshed for STALE_MS (shared/store/lock.ts). The tools run
 * blocked here answer in milliseconds, each under its deadline; in a block volume's whole FlexVolume
 * life (strace of each verb) they ran holding the node's lock alone, which lives in the state dir and
 * which no one takes from a live holder on this host, however long it goes unrefreshed. The runner's
 * way is also taken where neither /dev/shm nor /tmp can hold an unnamed file
 * (test/flex/capture-fallback.test.ts).
 */
export function spawnBlockingHere(): void {
  setSpawner((request) => Promise.resolve(runBlocking(request)));
}

/** Where the unnamed capture files may live: both are tmpfs or disk on every Linux node we know. */
const CAPTURE_DIRS = ['/dev/shm', '/tmp'];
/** Linux's O_TMPFILE (with O_DIRECTORY), which node:fs does not name. */
const O_TMPFILE = 0o20200000;

/** How a synchronous spawn ended: `status` is null when a signal ended the tool. */
interface SyncResult {
  status: number | null;
  /** A negative errno: the tool could not be started, or (ETIMEDOUT) was killed at its deadline. */
  error?: number;
}

/** One synchronous spawn: stdin closed, `fds` as the tool's fd 1, 2 (and 3), SIGKILL at the deadline. */
export type SyncSpawn = (request: SpawnRequest, fds: number[]) => SyncResult;

/** SIGKILL, as the binding wants it: a number (the public spawnSync converts its name). */
const SIGKILL = 9;

/**
 * Node's synchronous spawn without node:child_process: the binding child_process.spawnSync itself
 * calls, which process.binding still offers (deprecated for new code, DEP0111, and kept on its
 * allow-list for old code like this). Undefined where a Node no longer offers it.
 */
export function bindingSpawn(): SyncSpawn | undefined {
  let binding: unknown;
  try {
    binding = (process as unknown as { binding(name: string): unknown }).binding('spawn_sync');
  } catch {
    return undefined;
  }
  if (typeof binding !== 'object' || binding === null || !('spawn' in binding) || typeof binding.spawn !== 'function') return undefined;
  const spawn: (options: object) => unknown = binding.spawn.bind(binding);
  return (request, fds) =>
    parseResult(
      spawn({
        file: request.command,
        args: [request.command, ...request.args],
        envPairs: envPairs(request.env),
        stdio: [{ type: 'ignore' }, ...fds.map((fd) => ({ type: 'fd', fd }))],
        timeout: request.timeoutMs,
        killSignal: SIGKILL,
        maxBuffer: Number.MAX_SAFE_INTEGER,
        detached: false,
        windowsHide: false,
        windowsVerbatimArguments: false,
      }),
    );
}

/** The same through the public spawnSync, for a Node without the binding: it loads node:child_process. */
export const publicSpawn: SyncSpawn = (request, fds) => {
  const { spawnSync } = process.getBuiltinModule('node:child_process');
  const r = spawnSync(request.command, [...request.args], { env: request.env, stdio: ['ignore', ...fds], timeout: request.timeoutMs, killSignal: 'SIGKILL' });
  const errno = r.error && 'errno' in r.error && typeof r.error.errno === 'number' ? r.error.errno : undefined;
  return { status: r.status, ...(errno === undefined ? {} : { error: errno }) };
};

/** The binding's answer, read: its pid, output and signal name are not needed here. */
function parseResult(value: unknown): SyncResult {
  if (typeof value !== 'object' || value === null || !('status' in value)) throw internal('the synchronous spawn answered nothing readable');
  const status = typeof value.status === 'number' ? value.status : null;
  const error = 'error' in value && typeof value.error === 'number' ? value.error : undefined;
  return { status, ...(error === undefined ? {} : { error }) };
}

let chosen: SyncSpawn | undefined;

/** The binding where this Node offers it, else the public spawnSync; looked for once. */
function defaultSyncSpawn(): SyncSpawn {
  chosen ??= bindingSpawn() ?? publicSpawn;
  return chosen;
}

/**
 * One tool, run to its exit: the same Captured that spawnCaptured reports for the same request, or
 * spawnCaptured's own promise for a lengthy tool. Tests pass either way of spawning as `spawnSync`.
 */
export function runBlocking(request: SpawnRequest, spawnSync: SyncSpawn = defaultSyncSpawn()): Captured | Promise<Captured> {
  if (request.lengthy) return spawnHere(request);
  const out = unnamedFile();
  const err = out === undefined ? undefined : unnamedFile();
  if (out === undefined || err === undefined) {
    if (out !== undefined) closeSync(out);
    return spawnHere(request);
  }
  const started = process.hrtime.bigint();
  try {
    const result = spawnSync(request, request.fd3 === undefined ? [out, err] : [out, err, request.fd3]);
    const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
    const captured = { stdout: readAll(out, request.outputCap), stderr: readAll(err, request.outputCap), durationMs };
    const error = result.error === undefined ? undefined : getSystemErrorName(result.error);
    if (error === 'ETIMEDOUT') return { exitCode: -1, ...captured, timedOut: true };
    // As spawn's error event words it: "spawn ENOENT".
    if (error !== undefined) return { exitCode: -1, ...captured, timedOut: false, startError: `spawn ${error}` };
    return { exitCode: result.status ?? -1, ...captured, timedOut: false };
  } finally {
    closeSync(out);
    closeSync(err);
  }
}

function unnamedFile(): number | undefined {
  for (const dir of CAPTURE_DIRS) {
    try {
      return openSync(dir, constants.O_RDWR | O_TMPFILE, 0o600);
    } catch {
      // Not there, or no O_TMPFILE on its filesystem: the next one.
    }
  }
  return undefined;
}

/**
 * The file's last `cap` bytes as text, without the one trailing newline, after a line that says how
 * much went before: the text spawnCaptured makes of the same output (OUTPUT_CAP in shared/runner.ts).
 */
function readAll(fd: number, cap: number): string {
  const size = fstatSync(fd).size;
  const from = Math.max(0, size - cap);
  const bytes = Buffer.alloc(size - from);
  let at = 0;
  while (at < bytes.length) {
    const n = readSync(fd, bytes, at, bytes.length - at, from + at);
    if (n === 0) break;
    at += n;
  }
  return keptOutput(bytes.subarray(0, at), from, cap);
}
