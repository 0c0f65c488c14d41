import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ALL_TOOLS } from '../../csi/tools.js';
import { shQuote } from '../shell-quote.js';


/**
 * Counts the tools both models run, the same way for both: a stand-in for each tool first on the PATH
 * of the FlexVolume executable and of the CSI server records its name and execs the real one
 * (wrappedTool, below; the tests inject faults with it too, test/helpers/tool-wrapper.ts). The CSI server logs no spawns of its own, so this is the one count
 * that is alike for the two; the FlexVolume executable's own log line (its `spawns`) is read too, and
 * must agree with it. The price, one `sh` per tool run, is paid by both models alike. What a tool runs in
 * turn (mount's /sbin/mount.<type> helpers) is not counted, by either.
 */
export class ToolCounter {
  private readonly wrapped: { tool: string; w: WrappedTool }[];
  private seen = new Map<string, number>();

  constructor(root: string) {
    this.wrapped = ALL_TOOLS.filter(installed).map((tool) => ({ tool, w: wrappedTool(root, tool) }));
    this.take();
  }

  /** The directories to put first on a PATH. */
  get path(): string {
    return this.wrapped.map((x) => x.w.dir).join(':');
  }

  /** The tools run since the last take, one name per run (in tool order: runs of different tools interleave unseen). */
  take(): string[] {
    const out: string[] = [];
    for (const { tool, w } of this.wrapped) {
      const total = w.calls().length;
      for (let i = this.seen.get(tool) ?? 0; i < total; i++) out.push(tool);
      this.seen.set(tool, total);
    }
    return out;
  }
}

function installed(tool: string): boolean {
  try {
    return existsSync(realTool(tool));
  } catch {
    return false;
  }
}

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
  // Quoted: the log lies under $TMPDIR, which may hold a quote or a space (`sh: Unterminated quoted string`).
  writeFileSync(join(dir, tool), `#!/bin/sh\necho "$*" >> ${shQuote(log)}\n${before}\nexec ${shQuote(realTool(tool))} "$@"\n`);
  chmodSync(join(dir, tool), 0o755);
  return { dir, calls: () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : []) };
}

/** Where the real `tool` is installed, for a wrapper (or a test) to call it past any PATH shim. */
export function realTool(tool: string): string {
  const real = [`/usr/sbin/${tool}`, `/sbin/${tool}`, `/usr/bin/${tool}`, `/bin/${tool}`].find((p) => existsSync(p));
  if (!real) throw new Error(`${tool} is not installed`);
  return real;
}
