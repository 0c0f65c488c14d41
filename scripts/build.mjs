// Bundles each entry point into one self-contained CommonJS file with a shebang and its run bit.
// CommonJS, because kubelet runs the FlexVolume file under its bare name (no .mjs, no package.json
// beside it) and Node only treats such a file as ESM when told to.
import { build } from 'esbuild';
import { appendFile, chmod, copyFile, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import zlib, { brotliCompressSync } from 'node:zlib';
import { BESIDE_SUFFIX, buildSea, PACKED_MARKER } from './sea.mjs';
import { BUILT_ADDON, NATIVE_MOUNT_FILE } from './addon-files.mjs';

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  legalComments: 'none',
  loader: { '.proto': 'text' },
  // ESM-only dependencies read import.meta.url; in a CommonJS bundle it is rebuilt from __filename.
  define: { 'import.meta.url': '__twinvolImportMetaUrl', __TWINVOL_PACKED_MARKER__: JSON.stringify(PACKED_MARKER), __TWINVOL_BESIDE_SUFFIX__: JSON.stringify(BESIDE_SUFFIX), __TWINVOL_BUNDLED__: 'true' },
  logLevel: 'warning',
};
const importMetaShim = 'var __twinvolImportMetaUrl = require("node:url").pathToFileURL(__filename).href;';
// --no-warnings: kubelet reads stderr as part of the reply, so Node must never print a warning there.
const shebang = '#!/usr/bin/env -S node --no-warnings';

/**
 * Modules packed into the FlexVolume executable (see flex/packed-modules.ts): each bundled on its
 * own, minified and brotli-compressed into the executable's trailing comment, so that a kubelet call
 * reads and inflates only the one it needs: the dispatcher for verbs, yargs for the human CLI.
 */
const packedModules = {
  dispatch: "export { dispatch } from './flex/dispatch.ts';",
  cli: "export { runCli } from './flex/cli.ts';",
};

/**
 * The operator's tools, which kubelet never runs: bundled the same way, then all of them in one
 * blob (they share the core, grpc-js and execa, which one brotli window compresses once).
 */
const toolModules = {
  // The driver checker runs drivers through execa (test/exec/bundle.test.ts: never in the verbs' path).
  check: "export { checkUsage, runCheck } from './flex/check.ts';",
  // compare talks to a private CSI server (grpc).
  compare: "export { compareUsage, runCompareCommand } from './flex/compare/index.ts';",
  // migrate verify runs drivers (execa) and talks to a CSI server (grpc).
  verify: "export { verifyUsage, runVerify } from './flex/migrate/verify.ts';",
  // migrate plan parses YAML (test/migrate/plan-bundle.test.ts).
  migrate: "export { runMigratePlan } from './flex/migrate/index.ts';",
};

/**
 * Builtins a kubelet call pays for only if it uses them. Node compiles a builtin module the first time
 * it is required, and for these the price is a tenth or more of Node's whole start-up each (crypto,
 * assert, child_process); the core and the libraries under it require them at the top of a module,
 * while getvolumename, for one, spawns nothing and hashes nothing. So in the kubelet-facing modules
 * each becomes an ES module of stand-ins, one per function the builtin exports, that require it on
 * first call. An ES module, not a Proxy: esbuild's __toESM enumerates a CommonJS module's keys as
 * soon as an ES module imports it, which would load the builtin at once.
 */
// fs/promises: no kubelet verb uses it (the core's calls go through shared/fs-async.ts); the one core
// module that still imports it, shared/backends/exec-run.ts (the CSI server's), reaches the CLI's
// bundle with the core, and loads it only if called.
const LAZY_BUILTINS = ['crypto', 'child_process', 'assert', 'fs/promises'];

function lazyBuiltinSource(name) {
  const real = createRequire(import.meta.url)(`node:${name}`);
  const names = Object.keys(real).filter((k) => typeof real[k] === 'function' && /^[A-Za-z_$][\w$]*$/.test(k) && k !== 'default');
  const standIns = names.map((k) => `export function ${k}(...a) { return new.target ? Reflect.construct(load().${k}, a, new.target) : load().${k}(...a); }`);
  return `let m;\nconst load = () => (m ??= require(${JSON.stringify(`node:${name}`)}));\n${standIns.join('\n')}\n`;
}

const lazyBuiltins = {
  name: 'twinvol-lazy-builtins',
  setup(b) {
    const filter = new RegExp(`^(node:)?(${LAZY_BUILTINS.join('|')})$`);
    // The stand-ins' own require is of the real builtin (left to esbuild: external, as for any builtin).
    b.onResolve({ filter }, (args) => (args.namespace === 'lazy-builtin' ? undefined : { path: args.path.replace(/^node:/, ''), namespace: 'lazy-builtin' }));
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, (args) => ({ loader: 'js', contents: lazyBuiltinSource(args.path) }));
    // proper-lockfile registers its release-at-exit with signal-exit 3, whose argument checks load
    // node:assert (5 ms, on every verb that locks); signal-exit 4 (a dependency of ours for this) is
    // the same library's current major with the same onExit(cb, options).
    b.onResolve({ filter: /^signal-exit$/ }, (args) =>
      args.importer.includes('/node_modules/proper-lockfile/') ? { path: 'signal-exit', namespace: 'signal-exit-4' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'signal-exit-4' }, () => ({ loader: 'js', resolveDir: '.', contents: "module.exports = require('signal-exit').onExit;" }));
    // proper-lockfile's default fs is graceful-fs, whose loading patches node:fs and requires the
    // stream modules (legacy-streams.js): about 2 ms of attach and detach, which spawn nothing. Its
    // queue retries open/readdir/readFile-like calls on EMFILE; the lock uses mkdir, rmdir, stat,
    // utimes and realpath (lockSync wraps their sync forms), none of which it retries, so node:fs
    // itself serves the same calls.
    b.onResolve({ filter: /^graceful-fs$/ }, (args) =>
      args.importer.includes('/node_modules/proper-lockfile/') ? { path: 'graceful-fs', namespace: 'plain-fs' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'plain-fs' }, () => ({ loader: 'js', contents: "module.exports = require('node:fs');" }));
  },
};

/**
 * import.meta.url, for ESM-only dependencies, computed when read: requiring node:url up front costs a
 * kubelet call that never reads it (the dispatcher does not) a few hundredths of Node's start-up.
 */
const lazyImportMeta = 'var __twinvolImportMeta = { get url() { return require("node:url").pathToFileURL(__filename).href; } };';

async function bundleModule(contents, { lean = false } = {}) {
  const options = lean ? { define: { ...common.define, 'import.meta.url': '__twinvolImportMeta.url' }, banner: { js: lazyImportMeta }, plugins: [lazyBuiltins] } : { banner: { js: importMetaShim } };
  const r = await build({ ...common, stdin: { contents, resolveDir: '.', loader: 'ts' }, write: false, minify: true, ...options });
  return r.outputFiles[0].contents;
}

/**
 * The source of a worker thread's program, as its bundle runs it: bundled like the server (CommonJS,
 * syntax minified only), without a shebang, which only a file's first byte may hold.
 */
async function serviceThreadSource(contents) {
  const r = await build({ ...common, stdin: { contents, resolveDir: '.', loader: 'ts' }, write: false, minifySyntax: true, banner: { js: importMetaShim } });
  return r.outputFiles[0].text;
}

function brotli(bytes) {
  return brotliCompressSync(bytes, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11, [zlib.constants.BROTLI_PARAM_LGWIN]: 24, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } });
}

/**
 * The trailer appended to a script of `scriptBytes` bytes, and the file to put beside it. The
 * trailer is one comment holding the dispatcher's blob in base64, then the index line
 * flex/packed-modules.ts reads from the file's last bytes: `//<PACKED_MARKER>{"name":[offset,
 * length, group, key?]}`. The blobs a kubelet call never reads (the CLI and the operator's tools)
 * go in the file beside it instead, after a first line `<PACKED_MARKER><key>` naming their build:
 * Node reads and decodes every byte of the script on every call, and their 440 KB cost each verb
 * 1 to 3 ms of CPU time (docs/architecture.md, "Start-up"). An index entry with a key is in
 * the file beside, at an offset counted from that file's start; one without is in the script.
 */
async function packedTrailer(scriptBytes) {
  const blobs = [];
  for (const [name, contents] of Object.entries(packedModules)) blobs.push({ names: [name], group: false, beside: name !== 'dispatch', data: brotli(await bundleModule(contents, { lean: true })) });
  const sources = {};
  for (const [name, contents] of Object.entries(toolModules)) sources[name] = Buffer.from(await bundleModule(contents)).toString('utf8');
  blobs.push({ names: Object.keys(toolModules), group: true, beside: true, data: brotli(Buffer.from(JSON.stringify(sources))) });
  const besideBlobs = blobs.filter((b) => b.beside).map((b) => b.data.toString('base64'));
  const key = createHash('sha256').update(besideBlobs.join('\n')).digest('hex').slice(0, 16);
  let text = `\n/*${PACKED_MARKER}\n`;
  let beside = `${PACKED_MARKER}${key}\n`;
  const index = {};
  for (const blob of blobs) {
    const base64 = blob.data.toString('base64');
    if (blob.beside) {
      for (const name of blob.names) index[name] = [Buffer.byteLength(beside), base64.length, blob.group, key];
      beside += `${base64}\n`;
    } else {
      for (const name of blob.names) index[name] = [scriptBytes + Buffer.byteLength(text), base64.length, blob.group];
      text += `${base64}\n`;
    }
  }
  const line = `//${PACKED_MARKER}${JSON.stringify(index)}\n`;
  // flex/packed-modules.ts reads the index from the file's last 4 KiB.
  if (line.length > 4096) throw new Error('the packed modules index is over 4 KiB');
  return { text: `${text}*/\n${line}`, beside: { suffix: BESIDE_SUFFIX, text: beside } };
}

const entries = [
  // The start-up path of every kubelet call: minified, no import.meta shim, the rest packed inside.
  { in: 'flex/main.ts', out: 'dist/flex/twinvol', lean: true, trailer: packedTrailer, sea: 'dist/sea/twinvol', nativeMount: true },
  // The CSI server's service thread is bundled on its own and carried in the server as a string
  // (csi/service-thread.ts starts it from there): each thread parses only its own code.
  // The mount addon goes beside each and beside their single executables (placeNativeMount).
  { in: 'csi/main.ts', out: 'dist/csi/twinvol-csi', sea: 'dist/sea/twinvol-csi', nativeMount: true, serviceThread: "import { runServiceThread } from './csi/service-thread-worker.ts';\nrunServiceThread();" },
  { in: 'scripts/demo.ts', out: 'dist/demo.cjs' },
];
const only = process.argv.slice(2);

// The project is "type":"module"; the bundles are CommonJS, as they are when installed alone.
await mkdir('dist', { recursive: true });
// Renamed into place like the bundles below: a bundle starting meanwhile reads it.
await writeFile(`dist/package.json.${process.pid}.tmp`, '{ "type": "commonjs" }\n');
await rename(`dist/package.json.${process.pid}.tmp`, 'dist/package.json');
for (const entry of entries) {
  if (only.length && !only.includes(entry.out)) continue;
  // Built beside the bundle and renamed over it: a test run spawning the bundle while another run
  // (test/global-setup.ts) rebuilds it finds the old one or the new one, never none (ENOENT).
  const temporary = `${entry.out}.${process.pid}.tmp`;
  await rm(temporary, { force: true });
  await mkdir(dirname(entry.out), { recursive: true });
  await build({
    ...common,
    ...(entry.serviceThread ? { define: { ...common.define, __TWINVOL_SERVICE_THREAD__: JSON.stringify(await serviceThreadSource(entry.serviceThread)) } } : {}),
    entryPoints: [entry.in],
    outfile: temporary,
    minify: Boolean(entry.lean),
    minifySyntax: true,
    banner: { js: entry.lean ? shebang : `${shebang}\n${importMetaShim}` },
  });
  if (entry.trailer) {
    const { text, beside } = await entry.trailer((await stat(temporary)).size);
    await appendFile(temporary, text);
    // The file beside goes in place first, so the script that names it never finds it missing.
    const besideTemporary = `${entry.out}${beside.suffix}.${process.pid}.tmp`;
    await writeFile(besideTemporary, beside.text, { mode: 0o644 });
    await rename(besideTemporary, `${entry.out}${beside.suffix}`);
  }
  await chmod(temporary, 0o755);
  await rename(temporary, entry.out);
  if (entry.nativeMount) await placeNativeMount([dirname(entry.out), ...(entry.sea ? [dirname(entry.sea)] : [])]);
}
// The same bundles as Node single executables, for hosts without Node (scripts/sea.mjs). The tests
// run them (test/sea, the single-executable pass of test/flex): TWINVOL_NO_SEA=1 skips them for a
// quick build only.
if (process.env.TWINVOL_NO_SEA !== '1') {
  const wanted = entries.filter((e) => e.sea && (!only.length || only.includes(e.out)));
  await Promise.all(wanted.map((e) => buildSea({ main: e.out, out: e.sea })));
}

/**
 * Puts the mount addon that `npm ci` built (scripts/build-native.mjs, build/Release) beside the CSI
 * server and the FlexVolume executable, where they look for it (shared/native-mount.ts
 * nativeMountBeside); a checkout without one leaves none behind either, so dist/ says what the
 * checkout has.
 */
async function placeNativeMount(dirs) {
  const present = await stat(BUILT_ADDON).then(() => true, () => false);
  for (const dir of dirs) {
    await mkdir(dir, { recursive: true });
    const to = `${dir}/${NATIVE_MOUNT_FILE}`;
    if (!present) {
      await rm(to, { force: true });
      continue;
    }
    await copyFile(BUILT_ADDON, `${to}.${process.pid}.tmp`);
    await rename(`${to}.${process.pid}.tmp`, to);
  }
}
