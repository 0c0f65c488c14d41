import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DriverRun, readReply, type ReplyOutcome, runDriver, secretsInArgument, shownOutput } from '../../shared/index.js';

export type DriverStatus = Extract<ReplyOutcome, { kind: 'success' }>['status'];

/** One FlexVolume call as kubelet made it: its reply judged by kubelet's rules, its time and what it spawned. */
export interface FlexCall {
  verb: string;
  /** Wall clock from spawn to exit, as kubelet waits for it: the process's start-up included. */
  ms: number;
  exitCode: number;
  /** The reply's fields; undefined when the call failed. */
  status: DriverStatus | undefined;
  /** kubelet's words for a call that failed ("<verb> command failed, status: Failure, reason: ..."). */
  failure?: string;
  /** stdout and stderr together, as kubelet read them. */
  output: string;
  /** The tools the executable's own log line lists for this call (flex/dispatch.ts `spawns`). */
  logged: string[];
}

/**
 * Runs a FlexVolume executable exactly as kubelet and the controller-manager do (pkg/volume/flexvolume
 * driver-call.go): a fresh process per call, the argv as given, stdin closed, cwd "/", the environment
 * given (kubelet's own, here the scratch world's), stdout and stderr read as ONE document, judged by
 * kubelet's strict rules (readReply, shared/backends/exec-reply.ts). "Not supported" throws: every
 * verb called here is one twinvol answers.
 */
export async function callFlex(bin: string, env: Record<string, string>, verb: string, args: readonly string[]): Promise<Omit<FlexCall, 'logged'>> {
  const { outcome, run } = await kubeletCall(bin, verb, args, { env });
  const { output, exitCode } = run;
  if (outcome.kind === 'not-supported') throw new Error(`FlexVolume ${verb}: Not supported`);
  if (outcome.kind === 'failure') return { verb, ms: run.durationMs, exitCode, status: undefined, failure: outcome.message, output };
  return { verb, ms: run.durationMs, exitCode, status: outcome.status, output };
}

/** As long as kubelet's own patience with a driver call: a hung call fails the run, not hangs it. */
const CALL_TIMEOUT_MS = 120_000;

/**
 * One driver call as kubelet makes it and judges it (shared/backends/exec-run.ts runDriver:
 * stdin closed, stdout and stderr in order as one text, a deadline that kills the process group;
 * shared/backends/exec-reply.ts readReply with kubelet's strict rules). A driver that cannot be
 * started or does not answer in time is a Failure, as kubelet reports it. `twinvol compare` and
 * `migrate verify` (flex/migrate/verify-flex.ts) both call drivers through this.
 */
export async function kubeletCall(file: string, verb: string, args: readonly string[], o: { timeoutMs?: number; env?: Record<string, string> } = {}): Promise<{ outcome: ReplyOutcome; run: DriverRun }> {
  const timeoutMs = o.timeoutMs ?? CALL_TIMEOUT_MS;
  // The driver's words less the secrets its options argument carries (a PV's password written inline):
  // verify's report shows them, and the CSI server's exec backend cuts them from its own the same way.
  const secrets = args.flatMap(secretsInArgument);
  const show = (text: string) => shownOutput(text, secrets);
  const run = await runDriver(file, [verb, ...args], { timeoutMs, graceMs: Math.min(2000, timeoutMs), ...(o.env ? { env: o.env } : {}) });
  const outcome: ReplyOutcome = run.startError
    ? { kind: 'failure', message: `${verb}: the driver could not be started: ${run.startError}` }
    : run.timedOut
      ? { kind: 'failure', message: `${verb}: no reply within ${timeoutMs} ms` }
      : readReply(verb, run, 'strict', show).outcome;
  return { outcome, run };
}

/**
 * The administrator's CLI of the FlexVolume executable (`twinvol volume create ...`), run the same way
 * in a scratch world by the compare and the demo; not starting or not answering throws.
 */
export async function runFlex(bin: string, env: Record<string, string>, argv: readonly string[]): Promise<DriverRun> {
  const done = await runDriver(bin, argv, { timeoutMs: CALL_TIMEOUT_MS, graceMs: 2000, env });
  if (done.startError) throw new Error(`${bin} could not be run: ${done.startError}`);
  if (done.timedOut) throw new Error(`${bin} ${argv[0] ?? ''}: no answer within ${CALL_TIMEOUT_MS / 1000} s`);
  return done;
}

/** What a FlexVolume call did by the executable's own account: the tools it ran, and the system calls it made in their place. */
export interface LoggedWork {
  spawns: string[];
  /** `mount`, `umount2`, `ioctl`; a call the kernel refused as `mount:EINVAL` (the tool then took the step, and is among the spawns). */
  systemCalls: string[];
}

/**
 * What the executable's last log line (`<stateDir>/log/flex.log`, one JSON line per call) says the
 * call did, checked to be the line of `verb`: `spawns: ["tool:exit:ms", ...]` and
 * `systemCalls: ["call:errno-or-0:ms", ...]` (flex/dispatch.ts).
 */
export function loggedWork(stateDir: string, verb: string): LoggedWork {
  const lines = readFileSync(join(stateDir, 'log/flex.log'), 'utf8').trimEnd().split('\n');
  const last = JSON.parse(lines[lines.length - 1] ?? '{}') as { call?: string; spawns?: unknown; systemCalls?: unknown };
  if (last.call !== verb) throw new Error(`the FlexVolume log's last line is for ${String(last.call)}, not ${verb}`);
  const fields = (list: unknown) => (Array.isArray(list) ? list.map((s) => String(s).split(':')) : []);
  return {
    spawns: fields(last.spawns).map(([tool]) => tool ?? ''),
    systemCalls: fields(last.systemCalls).map(([call, error]) => (error === undefined || error === '0' ? (call ?? '') : `${call ?? ''}:${error}`)),
  };
}
