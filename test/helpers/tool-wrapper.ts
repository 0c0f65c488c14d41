import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface WrappedTool {
  /** A directory to put first on the PATH of the process under test. */
  dir: string;
  /** Every call's arguments, one line per call, as the wrapper saw them. */
  calls(): string[];
}

/**
 * A stand-in for `tool` that records each call's arguments to a log, runs `before` (shell, with the
 * call's "$@"; it may `exit` to fail the call), then runs the real tool. For faults a test cannot make
 * happen for real: a copy that fails, or the kernel's answer observed from outside the process.
 */
export function wrappedTool(root: string, tool: string, before = ''): WrappedTool {
  const dir = join(root, `wrap-${tool}`);
  const log = join(root, `${tool}-calls.log`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, tool), `#!/bin/sh\necho "$*" >> '${log}'\n${before}\nexec ${realTool(tool)} "$@"\n`);
  chmodSync(join(dir, tool), 0o755);
  return { dir, calls: () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : []) };
}

export interface FailingTool extends WrappedTool {
  /** Takes the stand-in off the PATH: from the next call on, the real tool runs. */
  remove(): void;
}

/**
 * `tool` failing the way the real one does when what it needs is used up: a call with `whenArg` among
 * its arguments prints `stderr` and exits 1, any other call runs the real tool. For a fault the test
 * cannot cause without taking it from the whole machine (every loop device, say).
 */
export function failingTool(root: string, tool: string, whenArg: string, stderr: string): FailingTool {
  const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const wrapped = wrappedTool(root, tool, `for a in "$@"; do if [ "$a" = ${quote(whenArg)} ]; then echo ${quote(stderr)} >&2; exit 1; fi; done`);
  return { ...wrapped, remove: () => rmSync(join(wrapped.dir, tool), { force: true }) };
}

/** Where the real `tool` is installed, for a wrapper (or a test) to call it past any PATH shim. */
export function realTool(tool: string): string {
  const real = [`/usr/sbin/${tool}`, `/sbin/${tool}`, `/usr/bin/${tool}`, `/bin/${tool}`].find((p) => existsSync(p));
  if (!real) throw new Error(`${tool} is not installed`);
  return real;
}
