import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { wrappedTool, type WrappedTool } from '../../flex/compare/tool-count.js';
import { shQuote as quote } from '../../flex/shell-quote.js';

// The stand-in itself is shipped: `twinvol compare` counts tools with it (flex/compare/tool-count.ts).
export { realTool, wrappedTool, type WrappedTool } from '../../flex/compare/tool-count.js';

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
  const wrapped = wrappedTool(root, tool, `for a in "$@"; do if [ "$a" = ${quote(whenArg)} ]; then echo ${quote(stderr)} >&2; exit 1; fi; done`);
  return { ...wrapped, remove: () => rmSync(join(wrapped.dir, tool), { force: true }) };
}
