/**
 * Loads a module the build packed into this file. kubelet starts the FlexVolume executable once per
 * call, and Node reads, decodes, hashes and scans every byte of a script before running a line of
 * it: bundled plainly, the dispatcher, yargs and the operator tools made even `init` pay for 650 KB
 * of code, and as compressed strings in the script still for 150 KB. So the script itself is only
 * the start-up path (flex/main.ts); every other module is bundled on its own, compressed, and kept
 * in one trailing comment, which Node still reads but V8 only skips, followed by a last line that
 * indexes where each module sits (scripts/build.mjs packedTrailer). A call reads only the bytes of
 * the module it needs. A single executable has no script file to read, so scripts/sea.mjs turns the
 * index and each blob into assets.
 */
import type { CompileCache } from './compile-cache.js';

/** Where each module's blob sits in the file: its offset and length; `group` blobs hold several. */
type PackedIndex = Record<string, { at: number; length: number; group: boolean }>;

declare const __TWINVOL_PACKED_MARKER__: string;
/** scripts/sea.mjs PACKED_MARKER, put here by the build (esbuild define): one spelling for the three. */
const PACKED_MARKER = __TWINVOL_PACKED_MARKER__;
/** How much of the file's end holds the index line, at most (the build checks its index fits). */
const INDEX_TAIL_BYTES = 4096;

const loaded = new Map<string, unknown>();
let index: PackedIndex | undefined;

function isSea(): boolean {
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
    out[name] = { at: entry[0], length: entry[1], group: entry[2] };
  }
  return out;
}

/** The compressed bytes of the blob at `at`: from the file's comment, or a single executable's asset. */
function blobBytes(at: number, length: number): Buffer {
  if (isSea()) return Buffer.from((require('node:sea') as typeof import('node:sea')).getAsset(`${PACKED_MARKER}${at}`, 'latin1'), 'base64');
  const { closeSync, openSync, readSync } = require('node:fs') as typeof import('node:fs');
  const fd = openSync(__filename, 'r');
  try {
    const base64 = Buffer.alloc(length);
    if (readSync(fd, base64, 0, length, at) !== length) throw new Error(`${__filename} is truncated: a packed module is missing`);
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
  const text = brotliDecompressSync(blobBytes(entry.at, entry.length)).toString('utf8');
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
