import { spawn } from 'node:child_process';
import { internal, TwinvolError } from './errors.js';
import { redactOptionValues, secretOptionValues } from './log.js';
import { shownOutput } from './secret-text.js';
import { RecordLog } from './record-log.js';

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
  /** The tool may run for minutes (it walks a volume's data): shared/spawn-blocking.ts leaves it to spawnCaptured. */
  lengthy?: boolean;
}

/** How many spawns the log keeps (shared/record-log.ts says why only the latest): observers see every one. */
export const SPAWN_LOG_LIMIT = 256;
const spawns = new RecordLog<SpawnRecord>(SPAWN_LOG_LIMIT);

/** The latest spawns this process made (at most SPAWN_LOG_LIMIT), in order. */
export function spawnLog(): readonly SpawnRecord[] {
  return spawns.latest();
}

export function observeSpawns(observer: (record: SpawnRecord) => void): () => void {
  return spawns.observe(observer);
}

/**
 * Adds one finished command to the log and tells every observer (the CSI server's command metrics
 * and debug line). `run` records each of its tools; a third-party FlexVolume driver, which runs
 * outside this runner (shared/backends/exec-run.ts), is recorded by shared/backends/exec-driver.ts.
 */
export function recordSpawn(record: SpawnRecord): void {
  spawns.add(record);
}

/** kubelet runs drivers with a plain PATH; the tools we need live in the sbin directories. */
export function toolEnv(): NodeJS.ProcessEnv {
  const path = process.env.PATH ?? '';
  const parts = path.split(':').filter(Boolean);
  for (const dir of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'])
    if (!parts.includes(dir)) parts.push(dir);
  return { PATH: parts.join(':'), LC_ALL: 'C' };
}

/**
 * How a tool ran, before the runner judges it: what `spawnCaptured` reports, on this thread or on the
 * spawning thread (shared/spawn-thread.ts), which sends it back as a message.
 */
export interface Captured {
  /** -1 when it was killed by a signal or never started. */
  exitCode: number;
  stdout: string;
  stderr: string;
  durationMs: number;
  timedOut: boolean;
  /** Why it could not be started (spawn's error event), if it could not. */
  startError?: string;
}

/**
 * How much of each of a tool's streams is kept: its last OUTPUT_CAP bytes, after a line that says how
 * much went before (`... (N bytes left out)`). A tool explains at the end; one that writes without end
 * (a mount helper in a loop until its deadline) must not grow the server's memory with it.
 */
export const OUTPUT_CAP = 4 * 2 ** 20;

/**
 * A stream's kept bytes as the runner reports them: the last `cap` of them, after a line that says
 * how many went before (`dropped`, and any beyond the cap). spawnCaptured words it the same way in
 * its own copy, since it runs as source text on another thread (shared/spawn-thread.ts).
 */
export function keptOutput(bytes: Buffer, dropped: number, cap: number): string {
  const over = Math.max(0, bytes.length - cap);
  return afterLeftOut(bytes.subarray(over).toString('utf8').replace(/\n$/, ''), dropped + over);
}

/**
 * The end of an output after a line that says how many bytes went before it (`left`; none: the text
 * as it is). A cut through a character leaves replacement marks at the start: not the writer's words.
 */
export function afterLeftOut(text: string, left: number): string {
  return left ? `... (${left} bytes left out)\n${text.replace(/^\uFFFD+/, '')}` : text;
}

/**
 * A signal to a process (a negative pid: to its whole group) that may be gone already or not ours to
 * signal (ESRCH, EPERM): a deadline's kill, whose outcome the process's exit, or its absence, tells.
 */
export function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Gone already, or not ours to signal.
  }
}

/** The request's environment as `KEY=value` strings, for a spawn below node:child_process. */
export function envPairs(env: NodeJS.ProcessEnv): string[] {
  return Object.entries(env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
}

/** What `spawnCaptured` needs of a call; plain data, so that it crosses to another thread as it is. */
export interface SpawnRequest {
  command: string;
  args: readonly string[];
  timeoutMs: number;
  fd3?: number;
  lengthy?: boolean;
  env: NodeJS.ProcessEnv;
  /** OUTPUT_CAP, carried here because spawnCaptured may run as source text on another thread. */
  outputCap: number;
}

/** Runs the tools: `spawnHere` until the process asks for another (setSpawner). */
export type Spawner = (request: SpawnRequest) => Promise<Captured>;
export const spawnHere: Spawner = (request) => spawnCaptured(spawn, request);
let spawner = spawnHere;

/**
 * Where tools are spawned from. A spawn blocks the calling thread until the child has exec'd (about
 * 2 ms here), which a long-running server with other calls to answer moves to a thread of its own
 * (shared/spawn-thread.ts); a FlexVolume call, which has nothing else to do, spawns here.
 */
export function setSpawner(next: Spawner): void {
  spawner = next;
}

/**
 * Spawns one tool and captures it: an argument array (never a shell), stdin closed, stdout and stderr
 * captured (so no child ever holds kubelet's reply pipe), and a deadline that kills the tool itself
 * (SIGKILL).
 *
 * It settles when the tool EXITS, not when its pipes close. A mount helper may leave a daemon behind
 * (FUSE, a forked sleep) that inherits the capture pipes; waiting for them to close, as execa does,
 * made such a call hang past its deadline (a 25 s child held a 2 s deadline for 25 s). After the exit
 * the pipes are drained for 50 ms at most and then let go.
 *
 * Self-contained on purpose: it uses only its arguments and the language's globals, because
 * shared/spawn-thread.ts runs its source text on another thread, where this module's imports are not.
 */
export function spawnCaptured(spawnFn: typeof spawn, request: SpawnRequest): Promise<Captured> {
  return new Promise((resolve) => {
    // process.hrtime, not performance: the global `performance` loads perf_hooks (a FlexVolume call's millisecond).
    const started = process.hrtime.bigint();
    // Each stream's chunks, the oldest dropped once the rest hold the last outputCap bytes (OUTPUT_CAP).
    const stream = () => ({ chunks: [] as Buffer[], bytes: 0, dropped: 0 });
    const stdout = stream();
    const stderr = stream();
    const keep = (s: ReturnType<typeof stream>) => (d: Buffer) => {
      s.chunks.push(d);
      s.bytes += d.length;
      for (let first = s.chunks[0]!; s.chunks.length > 1 && s.bytes - first.length >= request.outputCap; first = s.chunks[0]!) {
        s.chunks.shift();
        s.bytes -= first.length;
        s.dropped += first.length;
      }
    };
    const text = (s: ReturnType<typeof stream>) => {
      const all = Buffer.concat(s.chunks);
      const over = Math.max(0, all.length - request.outputCap);
      const left = s.dropped + over;
      const kept = all.subarray(over).toString('utf8').replace(/\n$/, '');
      return left ? `... (${left} bytes left out)\n${kept.replace(/^\uFFFD+/, '')}` : kept;
    };
    let timedOut = false;
    let settled = false;
    let deadline: ReturnType<typeof setTimeout> | undefined;
    let child: ReturnType<typeof spawn> | undefined;
    const settle = (exitCode: number, startError?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      child?.stdout?.destroy();
      child?.stderr?.destroy();
      resolve({ exitCode, stdout: text(stdout), stderr: text(stderr), durationMs: Number(process.hrtime.bigint() - started) / 1e6, timedOut, ...(startError === undefined ? {} : { startError }) });
    };
    try {
      child = spawnFn(request.command, [...request.args], {
        stdio: ['ignore', 'pipe', 'pipe', ...(request.fd3 === undefined ? [] : [request.fd3])],
        env: request.env,
        shell: false,
      });
    } catch (err) {
      settle(-1, err instanceof Error ? err.message : String(err));
      return;
    }
    const tool = child;
    tool.stdout?.on('data', keep(stdout));
    tool.stderr?.on('data', keep(stderr));
    deadline = setTimeout(() => {
      timedOut = true;
      tool.kill('SIGKILL');
    }, request.timeoutMs);
    tool.once('error', (err) => settle(-1, err.message));
    tool.once('exit', (code) => {
      const exitCode = code ?? -1;
      const drain = setTimeout(() => settle(exitCode), 50);
      tool.once('close', () => {
        clearTimeout(drain);
        settle(exitCode);
      });
    });
  });
}

/**
 * The single way the project runs an external tool (spawnCaptured says how), with a record of the
 * spawn. Exit codes outside 0 and `okExitCodes`, a missed deadline and a failed start are errors
 * that carry the tool's own words (bounded: errorDetail).
 */
export async function run(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  const ran = await spawner({ command, args, timeoutMs: options.timeoutMs, env: toolEnv(), outputCap: OUTPUT_CAP, ...(options.fd3 === undefined ? {} : { fd3: options.fd3 }), ...(options.lengthy ? { lengthy: true } : {}) });
  const answered = ran.exitCode === 0 || (options.okExitCodes ?? []).includes(ran.exitCode);
  const record: SpawnRecord = { command, args, exitCode: ran.exitCode, durationMs: ran.durationMs, failed: ran.startError !== undefined || ran.timedOut || !answered };
  recordSpawn(record);
  if (ran.startError !== undefined) throw internal(`${command} could not be started: ${ran.startError}`);
  if (ran.timedOut) throw internal(`${command} did not finish within ${options.timeoutMs} ms`);
  const outcome: RunResult = { ...record, stdout: ran.stdout, stderr: ran.stderr };
  if (!answered) throw new CommandError(outcome);
  return outcome;
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
    // The argv is shown for the operator, less any secret among its options (a static volume's password),
    // and so is its output, which may echo them (a mount helper printing its command line): cut from the
    // whole output, before errorDetail's cut could leave part of one at its edge.
    const secrets = result.args.flatMap(secretOptionValues);
    const detail = errorDetail(shownOutput(result.stderr || result.stdout, secrets));
    super('Internal', `${result.command} ${result.args.map(redactOptionValues).join(' ')} failed with exit code ${result.exitCode}${detail ? `: ${detail}` : ''}`);
  }
}
