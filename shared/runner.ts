import { spawn } from 'node:child_process';
import { internal, TwinvolError } from './errors.js';

/** One external command as it ran: what `compare` and the benchmarks count and time. */
export interface SpawnRecord {
  command: string;
  args: readonly string[];
  exitCode: number;
  durationMs: number;
  /** It did not answer: a deadline, a start failure, or an exit code that is not among its answers (the CSI server's metrics count these). */
  failed: boolean;
}

export interface RunResult extends SpawnRecord {
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  timeoutMs: number;
  /** Exit codes that are answers rather than failures (blkid's 2 = "nothing found"). */
  okExitCodes?: readonly number[];
  /** An open file the tool sees as its fd 3 (a pinned mount point: shared/pinned-target.ts). */
  fd3?: number;
}

type Observer = (record: SpawnRecord) => void;
const observers = new Set<Observer>();
const spawned: SpawnRecord[] = [];
/**
 * A FlexVolume call spawns a handful of tools and logs them all (flex/dispatch.ts); a CSI server runs
 * for months and spawns on every stage, so the log keeps only the latest: observers see every spawn.
 */
export const SPAWN_LOG_LIMIT = 256;

/** The latest spawns this process made (at most SPAWN_LOG_LIMIT), in order. */
export function spawnLog(): readonly SpawnRecord[] {
  return spawned;
}

export function observeSpawns(observer: Observer): () => void {
  observers.add(observer);
  return () => observers.delete(observer);
}

/** kubelet runs drivers with a plain PATH; the tools we need live in the sbin directories. */
export function toolEnv(): NodeJS.ProcessEnv {
  const path = process.env.PATH ?? '';
  const parts = path.split(':').filter(Boolean);
  for (const dir of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'])
    if (!parts.includes(dir)) parts.push(dir);
  return { PATH: parts.join(':'), LC_ALL: 'C' };
}

/** How long to keep reading after the tool exited, for output still in the pipe buffers. */
const DRAIN_MS = 50;

/**
 * The single way the project runs an external tool: an argument array (never a shell), stdin closed,
 * stdout and stderr captured (so no child ever holds kubelet's reply pipe), a deadline, and a record
 * of the spawn.
 *
 * It settles when the tool EXITS, not when its pipes close. A mount helper may leave a daemon behind
 * (FUSE, a forked sleep) that inherits the capture pipes; waiting for them to close, as execa does,
 * made such a call hang past its deadline (a 25 s child held a 2 s deadline for 25 s). After the exit
 * the pipes are drained briefly and then let go. The deadline kills the tool itself (SIGKILL).
 */
export function run(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, [...args], {
      stdio: ['ignore', 'pipe', 'pipe', ...(options.fd3 === undefined ? [] : [options.fd3])],
      env: toolEnv(),
      shell: false,
    });
    // Both are pipes, as asked above; the checks only tell the type checker so.
    const out = child.stdout;
    const errOut = child.stderr;
    if (!out || !errOut) throw internal(`${command} started without its output pipes`);
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    out.on('data', (d: Buffer) => stdout.push(d));
    errOut.on('data', (d: Buffer) => stderr.push(d));
    let timedOut = false;
    let settled = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, options.timeoutMs);

    const settle = (exitCode: number, failure?: TwinvolError) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      out.destroy();
      errOut.destroy();
      const answered = exitCode === 0 || (options.okExitCodes ?? []).includes(exitCode);
      const record: SpawnRecord = { command, args, exitCode, durationMs: performance.now() - started, failed: Boolean(failure) || timedOut || !answered };
      spawned.push(record);
      if (spawned.length > SPAWN_LOG_LIMIT) spawned.splice(0, spawned.length - SPAWN_LOG_LIMIT);
      for (const observer of observers) observer(record);
      const outcome: RunResult = { ...record, stdout: text(stdout), stderr: text(stderr) };
      if (failure) reject(failure);
      else if (timedOut) reject(internal(`${command} did not finish within ${options.timeoutMs} ms`));
      else if (!answered) reject(new CommandError(outcome));
      else resolve(outcome);
    };

    child.once('error', (err) => settle(-1, internal(`${command} could not be started: ${err.message}`)));
    child.once('exit', (code) => {
      const exitCode = code ?? -1;
      const drain = setTimeout(() => settle(exitCode), DRAIN_MS);
      child.once('close', () => {
        clearTimeout(drain);
        settle(exitCode);
      });
    });
  });
}

function text(chunks: readonly Buffer[]): string {
  return Buffer.concat(chunks).toString('utf8').replace(/\n$/, '');
}

/** How much of a failed tool's output its error keeps: the last lines, bounded in bytes too. */
export const ERROR_DETAIL_LINES = 20;
export const ERROR_DETAIL_BYTES = 4096;

/**
 * The tail of a failed tool's output: its last ERROR_DETAIL_LINES lines, then at most
 * ERROR_DETAIL_BYTES of those. The last lines, because tools explain at the end; 20 of them, because
 * the reason is not always last (mkfs.xfs prints "Filesystem must be larger than 300MB." and then its
 * whole usage: keeping 3 lines hid the reason). Lines are joined with "; " so the message stays one line.
 */
export function errorDetail(output: string): string {
  const lines = output.trim().split('\n').map((l) => l.trim()).filter(Boolean).slice(-ERROR_DETAIL_LINES);
  let detail = lines.join('; ');
  if (Buffer.byteLength(detail) > ERROR_DETAIL_BYTES) detail = `...${Buffer.from(detail).subarray(-ERROR_DETAIL_BYTES).toString('utf8').replace(/^\uFFFD+/, '')}`;
  return detail;
}

/** A tool that ran and failed; the message carries its stderr, which is where mount(8) and friends explain. */
export class CommandError extends TwinvolError {
  constructor(readonly result: RunResult) {
    const detail = errorDetail(result.stderr || result.stdout);
    super('Internal', `${result.command} ${result.args.join(' ')} failed with exit code ${result.exitCode}${detail ? `: ${detail}` : ''}`);
  }
}
