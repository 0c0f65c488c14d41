import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readReply, type ReplyOutcome } from '../../shared/index.js';

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
  const started = performance.now();
  const { output, exitCode } = await new Promise<{ output: string; exitCode: number }>((done, fail) => {
    const child = spawn(bin, [verb, ...args], { cwd: '/', stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ output: out, exitCode: code ?? -1 }));
  });
  const ms = performance.now() - started;
  const { outcome } = readReply(verb, { output, exitCode }, 'strict');
  if (outcome.kind === 'not-supported') throw new Error(`FlexVolume ${verb}: Not supported`);
  if (outcome.kind === 'failure') return { verb, ms, exitCode, status: undefined, failure: outcome.message, output };
  return { verb, ms, exitCode, status: outcome.status, output };
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
