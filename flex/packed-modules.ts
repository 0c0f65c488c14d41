/**
 * Loads a module the build packed into this file, or beside it. kubelet starts the FlexVolume
 * executable once per call, and Node reads, decodes, hashes and scans every byte of a script before
 * running a line of it: bundled plainly, the dispatcher, yargs and the operator tools made even
 * `init` pay for 650 KB of code, and as compressed strings in the script still for 150 KB. So the
 * script itself is only the start-up path (flex/main.ts); the dispatcher, which every verb but
 * `init` runs, is bundled on its own, compressed, and kept in one trailing comment, which Node still
 * reads but V8 only skips, followed by a last line that indexes where each module sits
 * (scripts/build.mjs packedTrailer). The modules no kubelet call runs (the CLI, the operator's
 * tools) are kept the same way in a file beside the executable, `<executable>.modules`, which the
 * index names by a key that its first line repeats. A call reads only the bytes of the module it
 * needs. A single executable has no script file to read, so scripts/sea.mjs turns the index and
 * each blob into assets.
 */
import { errnoCode } from '../shared/index.js';
import type { CompileCache } from './compile-cache.js';

/**
 * Where each module's blob sits: its offset and length; `group` blobs hold several; `beside`, the key
 * of the file beside the executable that holds it (undefined: the executable itself).
 */
type PackedEntry = { at: number; length: number; group: boolean; beside: string | undefined };
type PackedIndex = Record<string, PackedEntry>;

declare const __TWINVOL_PACKED_MARKER__: string;
/** scripts/sea.mjs PACKED_MARKER, put here by the build (esbuild define): one spelling for the three. */
const PACKED_MARKER = __TWINVOL_PACKED_MARKER__;
/** How much of the file's end holds the index line, at most (the build checks its index fits). */
const INDEX_TAIL_BYTES = 4096;
declare const __TWINVOL_BESIDE_SUFFIX__: string;
/** scripts/sea.mjs BESIDE_SUFFIX, put here by the build: the operator modules' file is the executable's path and this. */
export const BESIDE_SUFFIX = __TWINVOL_BESIDE_SUFFIX__;
const BESIDE_KEY = /^[0-9a-f]{16}$/;

const loaded = new Map<string, unknown>();
let index: PackedIndex | undefined;

/** Whether this process is a single executable application, which carries its modules as assets. */
export function isSea(): boolean {
  return (require('node:sea') as typeof import('node:sea')).isSea();
}

function readIndex(): PackedIndex {
  if (index) return index;
  let text: string;
  if (isSea()) text = (require('node:sea') as typeof import('node:sea')).getAsset(PACKED_MARKER, 'utf8');
  else {
    const { closeSync, fstatSync, openSync, readSync } = require('node:fs') as typeof import('node:fs');
    const fd = openSync(__filename, 'r');
    try {
      const size = fstatSync(fd).size;
      const tail = Buffer.alloc(Math.min(size, INDEX_TAIL_BYTES));
      readSync(fd, tail, 0, tail.length, size - tail.length);
      const line = tail.toString('latin1');
      const at = line.lastIndexOf(`//${PACKED_MARKER}`);
      if (at < 0) throw new Error(`${__filename} holds no packed modules (built without them?)`);
      const end = line.indexOf('\n', at);
      text = line.slice(at + 2 + PACKED_MARKER.length, end < 0 ? undefined : end);
    } finally {
      closeSync(fd);
    }
  }
  index = parseIndex(JSON.parse(text));
  return index;
}

function parseIndex(parsed: unknown): PackedIndex {
  const out: PackedIndex = {};
  if (typeof parsed !== 'object' || parsed === null) throw new Error('the packed modules index is damaged');
  for (const [name, entry] of Object.entries(parsed)) {
    if (!Array.isArray(entry) || !Number.isSafeInteger(entry[0]) || !Number.isSafeInteger(entry[1]) || typeof entry[2] !== 'boolean')
      throw new Error(`the packed modules index is damaged at ${name}`);
    const beside: unknown = entry[3];
    if (beside !== undefined && (typeof beside !== 'string' || !BESIDE_KEY.test(beside))) throw new Error(`the packed modules index is damaged at ${name}`);
    out[name] = { at: entry[0], length: entry[1], group: entry[2], beside };
  }
  return out;
}

/** A single executable's asset for a blob: scripts/sea.mjs names them so. */
const assetName = (entry: { at: number; beside: string | undefined }) => `${PACKED_MARKER}${entry.beside ? `${entry.beside}:` : ''}${entry.at}`;

/**
 * The compressed bytes of `entry`'s blob: a single executable's asset, or read from the file that
 * holds it, this executable or the file beside it once its first line shows it is the one the
 * index names. Either missing or another build's is said in words an operator can act on.
 */
function blobBytes(entry: PackedEntry): Buffer {
  if (isSea()) return Buffer.from((require('node:sea') as typeof import('node:sea')).getAsset(assetName(entry), 'latin1'), 'base64');
  const { closeSync, openSync, readSync } = require('node:fs') as typeof import('node:fs');
  const path = entry.beside ? `${__filename}${BESIDE_SUFFIX}` : __filename;
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    const where = entry.beside ? ": the commands other than kubelet's are kept there, beside the executable; copy it with the executable, or install with `twinvol install flex`" : '';
    throw new Error(`${path} cannot be read (${errnoCode(err) ?? String(err)})${where}`);
  }
  try {
    const readAt = (length: number, position: number) => {
      const bytes = Buffer.alloc(length);
      return readSync(fd, bytes, 0, length, position) === length ? bytes : undefined;
    };
    if (entry.beside) {
      const want = `${PACKED_MARKER}${entry.beside}\n`;
      if (readAt(want.length, 0)?.toString('latin1') !== want) throw new Error(`${path} is not the one ${__filename} was built with: copy the two files of one build together`);
    }
    const base64 = readAt(entry.length, entry.at);
    if (!base64) throw new Error(`${path} is truncated: a packed module is missing`);
    return Buffer.from(base64.toString('latin1'), 'base64');
  } finally {
    closeSync(fd);
  }
}

/** The source of module `name`: its blob inflated, or its entry in a blob that holds a group. */
function sourceOf(name: string): string {
  const entry = readIndex()[name];
  if (!entry) throw new Error(`module ${name} is not packed into this executable`);
  const { brotliDecompressSync } = require('node:zlib') as typeof import('node:zlib');
  const text = brotliDecompressSync(blobBytes(entry)).toString('utf8');
  if (!entry.group) return text;
  const group: unknown = JSON.parse(text);
  const source = typeof group === 'object' && group !== null ? (group as Record<string, unknown>)[name] : undefined;
  if (typeof source !== 'string') throw new Error(`the packed module ${name} is damaged`);
  return source;
}

type ModuleFunction = (exports: unknown, require: NodeJS.Require, module: { exports: unknown }, filename: string, dirname: string) => void;

/**
 * Compiles module `name` as Node wraps a CommonJS module. With a cache (flex/compile-cache.ts), its
 * source and V8's compiled code come from there when V8 accepts them; otherwise the source is the
 * executable's own copy and the cache is made anew at exit, so a damaged cache costs one slow call.
 */
function compile(name: string, cache: CompileCache | undefined): ModuleFunction {
  // Builtins are required here rather than imported, so that `init` loads neither zlib nor vm.
  const { Script } = require('node:vm') as typeof import('node:vm');
  const make = (source: string, cachedData?: Buffer) =>
    new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: `${__filename}#${name}`, cachedData });
  const cached = cache?.read(name);
  if (cached?.data) {
    try {
      const script = make(cached.source, cached.data);
      if (script.cachedDataRejected === false) return script.runInThisContext() as ModuleFunction;
    } catch {
      // A source that does not compile: the executable's copy below.
    }
  }
  const source = sourceOf(name);
  const script = make(source);
  // The source is written again only when the cache's is not this one (another build's, or damaged).
  cache?.saveAtExit(name, script, source === cached?.source ? undefined : source);
  return script.runInThisContext() as ModuleFunction;
}

/** Loads module `name` once; `cache` only for the kubelet verbs' dispatcher (flex/main.ts). */
export function loadPacked<T>(name: string, cache?: CompileCache): T {
  if (loaded.has(name)) return loaded.get(name) as T;
  const mod = { exports: {} as T };
  // Packed modules bundle everything but Node's builtins, which the ordinary require provides.
  compile(name, cache)(mod.exports, require, mod, __filename, __dirname);
  loaded.set(name, mod.exports);
  return mod.exports;
}
