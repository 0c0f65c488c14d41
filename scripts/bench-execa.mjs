// What a driver call's spawn costs, for the exec backend (shared/backends/exec-run.ts), next to the
// core's runner (shared/runner.ts). Spawns /bin/true through:
//   spawn             node:child_process, nothing captured (the floor)
//   runner            shared/runner.ts run(), the core's one runner (pipes, settles on exit)
//   execa             plain execa('true') with its defaults (pipes, waits for them)
//   driver/execa      runDriver() through execa: detached group, output to an unlinked file
//   driver/posix      runDriver() through the addon's posix_spawn (native/spawn.c spawnDriver)
// For each: the call's time, and the longest the event loop went without a turn during it (what the
// CSI service thread's other calls wait). A fork copies the page tables of the whole process, so
// `--grow <MiB>` first grows this one (the CSI server runs at about 80-170 MiB). Rounds alternate
// the contenders so machine noise hits all alike; medians of the per-round medians are what to read.
//   node scripts/bench-execa.mjs [calls-per-round] [rounds] [--grow MiB]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { grow: { type: 'string', default: '0' } } });
const [calls = 50, rounds = 7] = positionals.map(Number);
const grow = Number(values.grow);
if (!Number.isInteger(grow) || grow < 0) throw new Error('--grow takes a size in MiB');

// The sources are TypeScript: bundle what is measured, through the core's public entry, into one module.
const scratch = mkdtempSync('/tmp/twinvol-bench-execa-');
const bundle = join(scratch, 'contenders.mjs');
const result = await build({
  stdin: {
    contents: "export { run, runDriver, setNativeMountPath } from './shared/index.js'; export { execa } from 'execa';",
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
const { run, runDriver, setNativeMountPath, execa } = await import(pathToFileURL(bundle).href);
setNativeMountPath(resolve('build/Release/twinvol_mount.node'));

// Ballast the garbage collector keeps: touched pages, as a long-running server's heap is.
const ballast = Array.from({ length: grow }, () => Buffer.alloc(2 ** 20, 1));

const TRUE = '/bin/true';
const driver = (spawner) => async () => {
  const r = await runDriver(TRUE, [], { timeoutMs: 10_000, graceMs: 1000, spawner });
  if (r.exitCode !== 0) throw new Error(`${spawner}: ${r.startError ?? `exit ${r.exitCode}`}`);
};
const contenders = {
  spawn: () => new Promise((done, fail) => spawn(TRUE, [], { stdio: 'ignore' }).once('error', fail).once('exit', done)),
  runner: () => run(TRUE, [], { timeoutMs: 10_000 }),
  execa: () => execa(TRUE, []),
  'driver/execa': driver('execa'),
  'driver/posix': driver('posix_spawn'),
};

/** One call: its time, and the longest gap between turns of the loop while it ran (a setImmediate chain). */
async function timed(fn) {
  const started = performance.now();
  let held = 0;
  let last = started;
  let done = false;
  const spin = () => {
    const now = performance.now();
    held = Math.max(held, now - last);
    last = now;
    if (!done) setImmediate(spin);
  };
  setImmediate(spin);
  await fn();
  done = true;
  return [performance.now() - started, held];
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const perRound = Object.fromEntries(Object.keys(contenders).map((k) => [k, { call: [], held: [] }]));
for (const fn of Object.values(contenders)) for (let i = 0; i < 5; i++) await fn(); // warm-up
for (let r = 0; r < rounds; r++) {
  const order = Object.entries(contenders);
  for (const [name, fn] of r % 2 ? order.reverse() : order) {
    const samples = [];
    for (let i = 0; i < calls; i++) samples.push(await timed(fn));
    perRound[name].call.push(median(samples.map((s) => s[0])));
    perRound[name].held.push(median(samples.map((s) => s[1])));
  }
}
rmSync(scratch, { recursive: true, force: true });

const rss = process.memoryUsage().rss / 2 ** 20;
const base = median(perRound.runner.call);
console.log(`spawn of ${TRUE}: ${calls} calls x ${rounds} rounds per contender, RSS ${rss.toFixed(0)} MiB (${ballast.length} MiB grown)`);
for (const [name, { call, held }] of Object.entries(perRound)) {
  const c = median(call);
  console.log(`  ${name.padEnd(13)} ${c.toFixed(2).padStart(6)} ms/call  x${(c / base).toFixed(2)} of the runner   loop held ${median(held).toFixed(2)} ms`);
}
