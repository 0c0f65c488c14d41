import { internal, TwinvolError } from './errors.js';

/** One external command as it ran: what `compare` and the benchmarks count and time. */
export interface SpawnRecord {
  command: string;
  args: readonly string[];
  exitCode: number;
  durationMs: number;
}

export interface RunResult extends SpawnRecord {
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  timeoutMs: number;
  /** Exit codes that are answers rather than failures (blkid's 2 = "nothing found"). */
  okExitCodes?: readonly number[];
}

type Observer = (record: SpawnRecord) => void;
const observers = new Set<Observer>();
const spawned: SpawnRecord[] = [];

/** Every spawn this process made, in order. */
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

/**
 * The single way the project runs an external tool: an argument array (never a shell), stdin closed,
 * stdout and stderr captured (so a child can never hold kubelet's reply pipe), a deadline, and a
 * record of the spawn. execa is imported on first use only: it costs a FlexVolume call 10-15 ms.
 */
export async function run(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  const { execa } = await import('execa');
  const started = performance.now();
  const result = await execa(command, [...args], {
    reject: false,
    stdin: 'ignore',
    timeout: options.timeoutMs,
    killSignal: 'SIGKILL',
    env: toolEnv(),
    extendEnv: false,
    encoding: 'utf8',
    stripFinalNewline: true,
  });
  const record: SpawnRecord = {
    command,
    args,
    exitCode: result.exitCode ?? -1,
    durationMs: performance.now() - started,
  };
  spawned.push(record);
  for (const observer of observers) observer(record);
  const outcome: RunResult = { ...record, stdout: String(result.stdout ?? ''), stderr: String(result.stderr ?? '') };
  if (result.timedOut) throw internal(`${command} did not finish within ${options.timeoutMs} ms`);
  if (result.exitCode === undefined) throw internal(`${command} could not be started: ${result.originalMessage ?? result.shortMessage}`);
  if (result.exitCode !== 0 && !(options.okExitCodes ?? []).includes(result.exitCode)) throw new CommandError(outcome);
  return outcome;
}

/** A tool that ran and failed; the message carries its stderr, which is where mount(8) and friends explain. */
export class CommandError extends TwinvolError {
  constructor(readonly result: RunResult) {
    const detail = (result.stderr || result.stdout).trim().split('\n').slice(-3).join('; ');
    super('Internal', `${result.command} ${result.args.join(' ')} failed with exit code ${result.exitCode}${detail ? `: ${detail}` : ''}`);
  }
}
