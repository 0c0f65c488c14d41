import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DriverRun, readReply, type ReplyOutcome, runDriver } from '../../shared/index.js';

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
  const done = await runFlex(bin, env, [verb, ...args]);
  const { output, exitCode } = done;
  const { outcome } = readReply(verb, done, 'strict');
  if (outcome.kind === 'not-supported') throw new Error(`FlexVolume ${verb}: Not supported`);
  if (outcome.kind === 'failure') return { verb, ms: done.durationMs, exitCode, status: undefined, failure: outcome.message, output };
  return { verb, ms: done.durationMs, exitCode, status: outcome.status, output };
}

/** As long as kubelet's own patience with a driver call: a hung call fails the run, not hangs it. */
const CALL_TIMEOUT_MS = 120_000;

/**
 * One run of the FlexVolume executable with `argv`, as kubelet runs a driver (shared/backends/
 * exec-run.ts runDriver: the environment given and nothing else, stdin closed, stdout and stderr in
 * order as one text, a deadline that kills the process group). Also the administrator's CLI
 * (`twinvol volume create ...`), which the compare and the demo run in their scratch world.
 */
export async function runFlex(bin: string, env: Record<string, string>, argv: readonly string[]): Promise<DriverRun> {
  const done = await runDriver(bin, argv, { timeoutMs: CALL_TIMEOUT_MS, graceMs: 2000, env });
  if (done.startError) throw new Error(`${bin} could not be run: ${done.startError}`);
  if (done.timedOut) throw new Error(`${bin} ${argv[0] ?? ''}: no answer within ${CALL_TIMEOUT_MS / 1000} s`);
  return done;
}

/**
 * The tools the executable's last log line says it ran (`<stateDir>/log/flex.log`, one JSON line per
 * call with `call` and `spawns: ["tool:exit:ms", ...]`), checked to be the line of `verb`.
 */
export function loggedSpawns(stateDir: string, verb: string): string[] {
  const lines = readFileSync(join(stateDir, 'log/flex.log'), 'utf8').trimEnd().split('\n');
  const last = JSON.parse(lines[lines.length - 1] ?? '{}') as { call?: string; spawns?: unknown };
  if (last.call !== verb) throw new Error(`the FlexVolume log's last line is for ${String(last.call)}, not ${verb}`);
  return Array.isArray(last.spawns) ? last.spawns.map((s) => String(s).split(':')[0] ?? '') : [];
}
