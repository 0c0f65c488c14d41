import packed from 'twinvol:packed';

/**
 * Loads a module the build packed into this file. Bundled code would be cheap to run but not to
 * load: V8 pre-parses every function of a script, and 650 KB of bundled yargs, execa (since
 * replaced) and the core made
 * every kubelet call (even `init`) pay for all of it. Packed modules are gzipped strings that cost
 * almost nothing to skip, compiled only when a call needs them: the dispatcher for verbs, yargs for
 * the human CLI. Still one file, with nothing beside it.
 */
const loaded = new Map<string, unknown>();

/**
 * The operator's tools (check, compare, migrate verify and plan) are not in the script at all: the
 * build appends them as one brotli blob in a trailing comment (scripts/build.mjs toolsTrailer), read
 * from this file only when a tool runs; a single executable has no file to read, so scripts/sea.mjs
 * makes the blob an asset of the same name.
 */
declare const __TWINVOL_TOOLS_MARKER__: string;
/** scripts/sea.mjs TOOLS_MARKER, put here by the build (esbuild define): one spelling for the three. */
const TOOLS_MARKER = __TWINVOL_TOOLS_MARKER__;
let tools: Record<string, string> | undefined;

function toolSources(): Record<string, string> {
  if (tools) return tools;
  const { brotliDecompressSync } = require('node:zlib') as typeof import('node:zlib');
  const sea = require('node:sea') as typeof import('node:sea');
  let base64: string;
  if (sea.isSea()) base64 = Buffer.from(sea.getAsset(TOOLS_MARKER)).toString('latin1');
  else {
    const { readFileSync } = require('node:fs') as typeof import('node:fs');
    const text = readFileSync(__filename, 'latin1');
    // The last one: the loader's own copy of the marker, above, comes first in the file.
    const at = text.lastIndexOf(`/*${TOOLS_MARKER}`);
    const end = text.indexOf('*/', at);
    if (at < 0 || end < 0) throw new Error(`${__filename} holds no operator tools (built without them?)`);
    base64 = text.slice(at + 2 + TOOLS_MARKER.length, end);
  }
  const parsed: unknown = JSON.parse(brotliDecompressSync(Buffer.from(base64, 'base64')).toString('utf8'));
  if (typeof parsed !== 'object' || parsed === null) throw new Error('the packed operator tools are damaged');
  tools = Object.fromEntries(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === 'string'));
  return tools;
}

export function loadPacked<T>(name: string): T {
  if (loaded.has(name)) return loaded.get(name) as T;
  // Builtins are required here rather than imported, so that `init` loads neither zlib nor vm.
  const { gunzipSync } = require('node:zlib') as typeof import('node:zlib');
  const { compileFunction } = require('node:vm') as typeof import('node:vm');
  const blob = packed[name];
  const source = blob !== undefined ? gunzipSync(Buffer.from(blob, 'base64')).toString('utf8') : toolSources()[name];
  if (source === undefined) throw new Error(`module ${name} is not packed into this executable`);
  const fn = compileFunction(source, ['exports', 'require', 'module', '__filename', '__dirname'], {
    filename: `${__filename}#${name}`,
  });
  const mod = { exports: {} as T };
  // Packed modules bundle everything but Node's builtins, which the ordinary require provides.
  fn(mod.exports, require, mod, __filename, __dirname);
  loaded.set(name, mod.exports);
  return mod.exports;
}
