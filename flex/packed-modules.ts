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

export function loadPacked<T>(name: string): T {
  if (loaded.has(name)) return loaded.get(name) as T;
  const blob = packed[name];
  if (blob === undefined) throw new Error(`module ${name} is not packed into this executable`);
  // Builtins are required here rather than imported, so that `init` loads neither zlib nor vm.
  const { gunzipSync } = require('node:zlib') as typeof import('node:zlib');
  const { compileFunction } = require('node:vm') as typeof import('node:vm');
  const source = gunzipSync(Buffer.from(blob, 'base64')).toString('utf8');
  const fn = compileFunction(source, ['exports', 'require', 'module', '__filename', '__dirname'], {
    filename: `${__filename}#${name}`,
  });
  const mod = { exports: {} as T };
  // Packed modules bundle everything but Node's builtins, which the ordinary require provides.
  fn(mod.exports, require, mod, __filename, __dirname);
  loaded.set(name, mod.exports);
  return mod.exports;
}
