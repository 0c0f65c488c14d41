import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute, normalize } from 'node:path';
import { errnoCode, failedPrecondition, invalidArgument, run } from '../shared/index.js';

/**
 * The bundle's first line as scripts/build.mjs writes it. `env` finds node on PATH and `-S` splits
 * what follows into arguments: the kernel execs env, then env execs node, on every kubelet call
 * (about 0.8 ms of a call's 20 here: docs/benchmarks.md), and the node found is the first on
 * kubelet's PATH, which a systemd unit sets, not the operator's shell.
 */
const ENV_SHEBANG = /^#!\/usr\/bin\/env -S node( [^\s]+)?\n/;

/**
 * How long a first line the kernel reads whole: 256 bytes of a script (BINPRM_BUF_SIZE in
 * linux/binfmts.h), newline included; a longer line is cut or refused.
 */
const SHEBANG_MAX = 255;

/** package.json's engines: the bundle's syntax and builtins need this Node (checked against it in test/flex/install.test.ts). */
export const MIN_NODE: readonly [number, number] = [20, 17];

/** How long `<node> --version` may take: a Node that does not answer in this has a problem of its own. */
const VERSION_DEADLINE_MS = 10_000;

/**
 * `twinvol install flex --node <path>`: checks that `path` can stand in a shebang and is a Node
 * this bundle runs on, by running it. Returns the path, or a usage message naming what was wrong.
 * The path is kept as given, not resolved: /usr/bin/node is a link that a package upgrade moves,
 * and the link is what stays.
 */
export async function checkedNode(path: string): Promise<string | { error: string }> {
  const shown = JSON.stringify(path.slice(0, 80));
  if (!isAbsolute(path) || normalize(path) !== path || path.endsWith('/')) return { error: `--node ${shown} must be an absolute, normalised path` };
  // The kernel ends the interpreter's path at the first space or tab, and the line at a newline.
  if (/[\s\0-\x1f\x7f]/.test(path)) return { error: `--node ${shown} holds a space or control character, which a first line #! cannot carry` };
  try {
    if (!statSync(path).isFile()) return { error: `--node ${shown} is not a file` };
    accessSync(path, constants.X_OK);
  } catch (err) {
    return { error: `--node ${shown} is not an executable file (${errnoCode(err) ?? String(err)})` };
  }
  let version: string;
  try {
    version = (await run(path, ['--version'], { timeoutMs: VERSION_DEADLINE_MS })).stdout.trim();
  } catch (err) {
    return { error: `--node ${shown} did not answer --version: ${err instanceof Error ? err.message : String(err)}` };
  }
  const m = /^v(\d+)\.(\d+)\.\d+$/.exec(version);
  if (!m) return { error: `--node ${shown} is not Node.js: --version answered ${JSON.stringify(version.slice(0, 80))}` };
  const [major, minor] = [Number(m[1]), Number(m[2])];
  if (major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1])) return { error: `--node ${shown} is Node.js ${version}; twinvol needs ${MIN_NODE.join('.')} or later` };
  return path;
}

/**
 * A first line that an install with --node wrote: a Node named directly, and the env line's argument.
 * Recognised so that an install run from such a driver can name another Node, or env again.
 */
// Read as latin1, byte for byte: only the kernel's own separators end a word (\s would also take the
// byte 0xa0 of a UTF-8 path for a blank).
const NODE_SHEBANG = /^#!(\/[^ \t\n]+)( [^ \t\n]+)?\n/;

/**
 * The bundle with its first line naming `node` directly, with the same argument, so the kernel
 * execs node alone; without `node`, the build's env line. A first line install does not know is
 * refused rather than guessed at: the kernel passes everything after the interpreter as one
 * argument, so only a single one carries over. The bundle may be the build's (the env line) or a
 * driver an install with --node placed (its Node's line): installing from an installed driver is
 * how an operator moves to another Node. Content with neither line (a single executable) is
 * returned as it is when no `node` is asked for. A path too long for the line is the operator's to
 * change (InvalidArgument); a bundle of another shape is the build's (FailedPrecondition).
 */
export function withNodeShebang(bundle: Buffer, node: string | undefined): Buffer {
  const head = bundle.subarray(0, 512).toString('latin1');
  const m = ENV_SHEBANG.exec(head) ?? NODE_SHEBANG.exec(head);
  if (!m) {
    if (node === undefined) return bundle;
    throw failedPrecondition('the running bundle does not start with "#!/usr/bin/env -S node" (or a Node\'s path) and at most one argument, so --node cannot rewrite its first line');
  }
  const argument = ENV_SHEBANG.test(head) ? m[1] : m[2];
  const line = Buffer.from(node === undefined ? `#!/usr/bin/env -S node${argument ?? ''}\n` : `#!${node}${argument ?? ''}\n`);
  if (line.length > SHEBANG_MAX) throw invalidArgument(`--node ${JSON.stringify((node ?? '').slice(0, 80))} makes a first line of ${line.length} bytes; the kernel reads ${SHEBANG_MAX}`);
  const first = Buffer.from(m[0], 'latin1');
  if (line.equals(first)) return bundle;
  const rest = bundle.subarray(first.length);
  return Buffer.concat([line, line.length === first.length ? rest : withIndexShifted(rest, line.length - first.length)]);
}

declare const __TWINVOL_PACKED_MARKER__: string;

/**
 * `rest` with its packed modules' index moved by `delta` bytes. The index (the last line: see
 * scripts/build.mjs packedTrailer, read by flex/packed-modules.ts readIndex) gives each blob in the
 * executable itself as an offset from the file's start, so a first line of another length left the
 * dispatcher read at the wrong bytes: every verb but `init` answered "Decompression failed". Blobs in
 * the file beside (an entry's fourth field) are counted from that file's start and stay.
 */
function withIndexShifted(rest: Buffer, delta: number): Buffer {
  const marker = `//${__TWINVOL_PACKED_MARKER__}`;
  const at = rest.lastIndexOf(marker);
  const end = rest.indexOf(0x0a, at);
  let index: unknown;
  try {
    index = at < 0 ? undefined : JSON.parse(rest.subarray(at + marker.length, end < 0 ? undefined : end).toString('latin1'));
  } catch {
    index = undefined;
  }
  if (typeof index !== 'object' || index === null) throw failedPrecondition('the running bundle has no packed modules index, so --node cannot rewrite its first line');
  const shifted = Object.fromEntries(Object.entries(index).map(([name, entry]: [string, unknown]) => [name, Array.isArray(entry) && entry.length === 3 && typeof entry[0] === 'number' ? [entry[0] + delta, ...entry.slice(1)] : entry]));
  return Buffer.concat([rest.subarray(0, at), Buffer.from(`${marker}${JSON.stringify(shifted)}`, 'latin1'), end < 0 ? Buffer.alloc(0) : rest.subarray(end)]);
}
