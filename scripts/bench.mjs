// Start-up and per-call cost of the FlexVolume executable, measured side by side with bare Node in
// one run (alternating, so machine noise hits every contender alike). Figures are ratios to
// `node -e 0`; absolute milliseconds on these shared machines mean little.
//   node scripts/bench.mjs [runs]     (npm run bench builds first)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const runs = Number(process.argv[2] ?? process.env.BENCH_RUNS ?? 40);
const flex = resolve('dist/flex/twinvol');
if (!existsSync(flex)) throw new Error('dist/flex/twinvol is missing: run npm run build');

const scratch = mkdtempSync('/tmp/twinvol-bench-');
// NODE_EXTRA_CA_CERTS makes every Node start read a CA bundle (about 30 ms here): unset for all sides.
const env = { PATH: '/usr/bin:/bin', TWINVOL_CONFIG: join(scratch, 'config.json'), TWINVOL_DATA_ROOT: join(scratch, 'data'), TWINVOL_STATE_DIR: join(scratch, 'state'), TWINVOL_KUBELET_DIR: join(scratch, 'kubelet'), TWINVOL_NODE_NAME: 'bench' };
writeFileSync(env.TWINVOL_CONFIG, '{}');
// The floor for any executable file: Node's module loader costs something over `-e` before a line runs.
const oneLiner = join(scratch, 'one-line.cjs');
writeFileSync(oneLiner, 'process.stdout.write("{}");\n');
const options = JSON.stringify({ 'kubernetes.io/fsType': '', 'kubernetes.io/pvOrVolumeName': 'pv', 'kubernetes.io/readwrite': 'rw', volumeId: 'bench-vol' });

const contenders = [
  { name: 'node -e 0 (baseline)', cmd: process.execPath, args: ['-e', '0'] },
  { name: 'node one-line.cjs (floor)', cmd: process.execPath, args: [oneLiner] },
  { name: 'twinvol init', cmd: flex, args: ['init'] },
  { name: 'twinvol Not supported verb', cmd: flex, args: ['getmetrics'] },
  { name: 'twinvol isattached (state read)', cmd: flex, args: ['isattached', options, 'bench'] },
  { name: 'twinvol unmount (never mounted)', cmd: flex, args: ['unmount', join(env.TWINVOL_KUBELET_DIR, 'pods/x/volumes/acme~twinvol/pv')] },
];

function once(c) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(c.cmd, c.args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0 && c.cmd !== flex) throw new Error(`${c.name} failed: ${r.stderr}`);
  if (c.cmd === flex) JSON.parse(`${r.stdout}${r.stderr}`); // a reply that does not parse is a failed call, not a fast one
  return ms;
}

const samples = contenders.map(() => []);
for (const c of contenders) once(c); // warm the page cache
for (let i = 0; i < runs; i++) {
  const order = i % 2 ? [...contenders.keys()].reverse() : [...contenders.keys()];
  for (const k of order) samples[k].push(once(contenders[k]));
}
rmSync(scratch, { recursive: true, force: true });

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
const base = quantile(samples[0], 0.5);
console.log(`FlexVolume start-up, ${runs} alternating runs each (NODE_EXTRA_CA_CERTS unset)`);
console.log('contender                           median ms   p90 ms   ratio to node -e 0');
contenders.forEach((c, k) => {
  const med = quantile(samples[k], 0.5);
  console.log(`${c.name.padEnd(36)}${med.toFixed(1).padStart(8)}${quantile(samples[k], 0.9).toFixed(1).padStart(9)}${(med / base).toFixed(2).padStart(10)}x`);
});

if (existsSync('scripts/bench-csi.mjs') && existsSync('dist/csi/twinvol-csi')) {
  console.log('');
  const r = spawnSync(process.execPath, ['scripts/bench-csi.mjs'], { stdio: 'inherit' });
  if (r.status !== 0) process.exitCode = 1;
}
