import { killIfStill } from './kill-if-still.js';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { shQuote } from '../../flex/shell-quote.js';
import { wrappedTool } from './tool-wrapper.js';

export interface StallingTool {
  /** A directory to put first on the PATH of the process under test. */
  dir: string;
  /** Written with the stalled call's pid when the tool stops. */
  marker: string;
}

/**
 * A stand-in for `tool` that stops (sleeps until killed) when its first argument is `whenFirstArg`,
 * and says so with a marker file: the process under test can then be killed at exactly that point,
 * as when a node dies or the process is OOM-killed. Other calls pass through to the real tool.
 */
export function stallingTool(root: string, tool: string, whenFirstArg: string): StallingTool {
  const marker = join(root, `${tool}-stalled`);
  rmSync(marker, { force: true });
  const { dir } = wrappedTool(root, tool, `if [ "$1" = ${shQuote(whenFirstArg)} ]; then echo $$ > ${shQuote(marker)}; exec sleep 60; fi`);
  return { dir, marker };
}

/** Waits (with a deadline) until the tool has stalled. */
export async function untilStalled(stall: StallingTool, what: string, deadlineMs = 20_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!existsSync(stall.marker) || !readFileSync(stall.marker, 'utf8').trim()) {
    if (Date.now() > until) throw new Error(`${what} never reached the stalled tool`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Kills the stalled tool's sleeper, if it got that far: called on success and failure alike. */
export function killStalled(stall: StallingTool): void {
  const pid = existsSync(stall.marker) ? Number(readFileSync(stall.marker, 'utf8')) : 0;
  // The stalled call exec'd `sleep 60`: only that is killed, never a process that took its pid since.
  if (pid > 0) killIfStill(pid, (argv) => argv[0] === 'sleep' && argv[1] === '60');
}
