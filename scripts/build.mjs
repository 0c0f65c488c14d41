// Bundles each entry point into one self-contained CommonJS file with a shebang and its run bit.
// CommonJS, because kubelet runs the FlexVolume file under its bare name (no .mjs, no package.json
// beside it) and Node only treats such a file as ESM when told to.
import { build } from 'esbuild';
import { chmod, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { gzipSync } from 'node:zlib';

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  legalComments: 'none',
  loader: { '.proto': 'text' },
  // ESM-only dependencies read import.meta.url; in a CommonJS bundle it is rebuilt from __filename.
  define: { 'import.meta.url': '__twinvolImportMetaUrl' },
  logLevel: 'warning',
};
const importMetaShim = 'var __twinvolImportMetaUrl = require("node:url").pathToFileURL(__filename).href;';
// --no-warnings: kubelet reads stderr as part of the reply, so Node must never print a warning there.
const shebang = '#!/usr/bin/env -S node --no-warnings';

/**
 * Modules packed into the FlexVolume executable (see flex/packed-modules.ts): each is bundled on its
 * own, minified, gzipped and base64-encoded.
 */
const packedModules = {
  dispatch: "export { dispatch } from './flex/dispatch.ts';",
  cli: "export { runCli } from './flex/cli.ts';",
  // The driver checker runs drivers through execa: its own module, so neither kubelet's verbs nor the
  // rest of the CLI ever load execa (test/exec/bundle.test.ts).
  check: "export { checkUsage, runCheck } from './flex/check.ts';",
  // compare talks to a private CSI server (grpc): loaded only for `twinvol compare`.
  compare: "export { compareUsage, runCompareCommand } from './flex/compare/index.ts';",
  // migrate verify runs drivers (execa) and talks to a CSI server (grpc): loaded only for that command.
  verify: "export { verifyUsage, runVerify } from './flex/migrate/verify.ts';",
  // migrate plan parses YAML: loaded only for `twinvol migrate plan` (test/migrate/plan-bundle.test.ts).
  migrate: "export { runMigratePlan } from './flex/migrate/index.ts';",
};

async function packedPlugin() {
  const packed = {};
  for (const [name, contents] of Object.entries(packedModules)) {
    const r = await build({ ...common, stdin: { contents, resolveDir: '.', loader: 'ts' }, write: false, minify: true, banner: { js: importMetaShim } });
    packed[name] = gzipSync(r.outputFiles[0].contents, { level: 9 }).toString('base64');
  }
  return {
    name: 'twinvol-packed',
    setup(b) {
      b.onResolve({ filter: /^twinvol:packed$/ }, (args) => ({ path: args.path, namespace: 'twinvol' }));
      b.onLoad({ filter: /.*/, namespace: 'twinvol' }, () => ({ contents: `export default ${JSON.stringify(packed)};`, loader: 'js' }));
    },
  };
}

const entries = [
  // The start-up path of every kubelet call: minified, no import.meta shim, the rest packed inside.
  { in: 'flex/main.ts', out: 'dist/flex/twinvol', lean: true, plugins: async () => [await packedPlugin()], sea: 'dist/sea/twinvol' },
  { in: 'csi/main.ts', out: 'dist/csi/twinvol-csi', sea: 'dist/sea/twinvol-csi' },
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
    entryPoints: [entry.in],
    outfile: temporary,
    minify: Boolean(entry.lean),
    minifySyntax: true,
    plugins: entry.plugins ? await entry.plugins() : [],
    banner: { js: entry.lean ? shebang : `${shebang}\n${importMetaShim}` },
  });
  await chmod(temporary, 0o755);
  await rename(temporary, entry.out);
}
// The same bundles as Node single executables, for hosts without Node (scripts/sea.mjs). The tests
// run them (test/sea, the single-executable pass of test/flex): TWINVOL_NO_SEA=1 skips them for a
// quick build only.
if (process.env.TWINVOL_NO_SEA !== '1') {
  const { buildSea } = await import('./sea.mjs');
  const wanted = entries.filter((e) => e.sea && (!only.length || only.includes(e.out)));
  await Promise.all(wanted.map((e) => buildSea({ main: e.out, out: e.sea })));
}
