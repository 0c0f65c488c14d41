// Bundles each entry point into one self-contained CommonJS file with a shebang and its run bit.
// CommonJS, because kubelet runs the FlexVolume file under its bare name (no .mjs, no package.json
// beside it) and Node only treats such a file as ESM when told to.
import { build } from 'esbuild';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

const entries = [
  { in: 'flex/main.ts', out: 'dist/flex/twinvol' },
  { in: 'csi/main.ts', out: 'dist/csi/twinvol-csi' },
  { in: 'scripts/demo.ts', out: 'dist/demo.cjs' },
];
const only = process.argv.slice(2);

// The project is "type":"module"; the bundles are CommonJS, as they are when installed alone.
await mkdir('dist', { recursive: true });
await writeFile('dist/package.json', '{ "type": "commonjs" }\n');
for (const entry of entries) {
  if (only.length && !only.includes(entry.out)) continue;
  await rm(entry.out, { force: true });
  await mkdir(dirname(entry.out), { recursive: true });
  await build({
    entryPoints: [entry.in],
    outfile: entry.out,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    minifySyntax: true,
    legalComments: 'none',
    loader: { '.proto': 'text' },
    // ESM-only dependencies read import.meta.url; in a CommonJS bundle it is rebuilt from __filename.
    define: { 'import.meta.url': '__twinvolImportMetaUrl' },
    // --no-warnings: kubelet reads stderr as part of the reply, so Node must never print a warning there.
    banner: {
      js: '#!/usr/bin/env -S node --no-warnings\nvar __twinvolImportMetaUrl = require("node:url").pathToFileURL(__filename).href;',
    },
    logLevel: 'warning',
  });
  await chmod(entry.out, 0o755);
}
