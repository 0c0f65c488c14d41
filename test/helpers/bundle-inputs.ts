import { resolve } from 'node:path';
import { build } from 'esbuild';

/** The repository root, for entries named relative to it. */
const ROOT = resolve(import.meta.dirname, '../..');

/**
 * The source files that land in `entry`'s bundle, bundled as scripts/build.mjs does: what a bundle
 * may not hold (execa, YAML, grpc on kubelet's start-up path) is checked against this list
 * (test/exec/bundle.test.ts, test/migrate/plan-bundle.test.ts).
 */
export async function inputsOf(entry: string): Promise<string[]> {
  const result = await build({
    entryPoints: [resolve(ROOT, entry)],
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    write: false,
    metafile: true,
    logLevel: 'silent',
    loader: { '.proto': 'text' },
  });
  // Inputs the bundle parsed may be tree-shaken to nothing: what counts is what lands in the output.
  const output = Object.values(result.metafile.outputs)[0];
  if (!output) throw new Error(`no output for ${entry}`);
  return Object.entries(output.inputs)
    .filter(([, use]) => use.bytesInOutput > 0)
    .map(([path]) => path);
}
