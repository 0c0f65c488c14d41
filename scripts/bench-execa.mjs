// What execa costs per call next to the project's own runner (shared/runner.ts, node:child_process),
// for the exec backend's driver calls (shared/backends/exec-run.ts). Spawns `true` N times through:
//   spawn       node:child_process, nothing captured (the floor)
//   runner      shared/runner.ts run(), the core's one runner (pipes, settles on exit)
//   execa       plain execa('true') with its defaults (pipes, waits for them)
//   exec-run    runDriver(): execa, detached group, output to an unlinked file, as drivers run
// Rounds alternate the contenders so machine noise hits all alike; medians of the per-round means
// and their ratio to the runner are what to read.
//   node scripts/bench-execa.mjs [calls-per-round] [rounds]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const calls = Number(process.argv[2] ?? 50);
const rounds = Number(process.argv[3] ?? 7);

// The sources are TypeScript: bundle what is measured, through the core's public entry, into one module.
const scratch = mkdtempSync('/tmp/twinvol-bench-execa-');
const bundle = join(scratch, 'contenders.mjs');
const result = await build({
  stdin: {
    contents: "export { run, runDriver } from './shared/index.js'; export { execa } from 'execa';",
    resolveDir: resolve('.'),
    loader: 'ts',
  },
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  write: false,
  logLevel: 'warning',
  // CommonJS dependencies of execa (cross-spawn) require node builtins.
  banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
});
writeFileSync(bundle, result.outputFiles[0].contents);
const { run, runDriver, execa } = await import(pathToFileURL(bundle).href);

const TRUE = '/bin/true';
const contenders = {
  // The floor: node:child_process with nothing captured.
  spawn: () => new Promise((done, fail) => spawn(TRUE, [], { stdio: 'ignore' }).once('error', fail).once('exit', done)),
  runner: () => run(TRUE, [], { timeoutMs: 10_000 }),
  execa: () => execa(TRUE, []),
  'exec-run': () => runDriver(TRUE, [], { timeoutMs: 10_000, graceMs: 1000 }),
};

const means = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
for (const fn of Object.values(contenders)) for (let i = 0; i < 5; i++) await fn(); // warm-up
for (let r = 0; r < rounds; r++) {
  for (const [name, fn] of Object.entries(contenders)) {
    const started = performance.now();
    for (let i = 0; i < calls; i++) await fn();
    means[name].push((performance.now() - started) / calls);
  }
}
rmSync(scratch, { recursive: true, force: true });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(means.runner);
console.log(`spawn of ${TRUE}: ${calls} calls x ${rounds} rounds per contender (median of round means)`);
for (const [name, xs] of Object.entries(means)) {
  const m = median(xs);
  console.log(`  ${name.padEnd(9)} ${m.toFixed(2).padStart(7)} ms/call   x${(m / base).toFixed(2)} of the runner`);
}
