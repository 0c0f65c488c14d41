// Cold start of the bundled CSI server (spawn to first successful Probe), side by side with a bare
// grpc-js server that loads the same proto and answers Probe (scripts/bench/bare-grpc-server.cjs).
// Runs alternate so machine noise hits both alike; medians and their ratio are what to read.
//   node scripts/bench-csi.mjs [runs]     (after npm run build)
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

const require = createRequire(import.meta.url);
const grpc = require('@grpc/grpc-js');
const { loadSync } = require('@grpc/proto-loader');

const runs = Number(process.argv[2] ?? process.env.BENCH_RUNS ?? 15);
const csiBin = resolve('dist/csi/twinvol-csi');
if (!existsSync(csiBin)) throw new Error('dist/csi/twinvol-csi is missing: run npm run build');

const definition = loadSync(resolve('csi/proto/csi.proto'), { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const Identity = grpc.loadPackageDefinition(definition).csi.v1.Identity;

const scratch = mkdtempSync('/tmp/twinvol-bench-csi-');
writeFileSync(join(scratch, 'config.json'), '{}');
// NODE_EXTRA_CA_CERTS makes every Node start read a CA bundle: left out for both contenders.
const env = { PATH: '/usr/bin:/bin', TWINVOL_CONFIG: join(scratch, 'config.json') };
const dirs = ['--data-root', join(scratch, 'data'), '--state-dir', join(scratch, 'state'), '--kubelet-dir', join(scratch, 'kubelet')];

const contenders = [
  { name: 'twinvol-csi (bundle)', args: (sock) => [csiBin, '--endpoint', `unix://${sock}`, '--node-id', 'bench', ...dirs] },
  { name: 'bare grpc-js + same proto', args: (sock) => [resolve('scripts/bench/bare-grpc-server.cjs'), sock] },
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function probe(sock) {
  return new Promise((done) => {
    const client = new Identity(`unix://${sock}`, grpc.credentials.createInsecure());
    client.Probe({}, { deadline: Date.now() + 2000 }, (err, res) => {
      client.close();
      done(!err && res?.ready?.value === true);
    });
  });
}

/** Milliseconds from spawn until a Probe answers ready; the socket is polled every millisecond. */
async function once(c, k) {
  const sock = join(scratch, `bench-${k}.sock`);
  rmSync(sock, { force: true });
  const t0 = process.hrtime.bigint();
  const child = spawn(process.execPath, c.args(sock), { env, stdio: ['ignore', 'ignore', 'ignore'] });
  const exited = new Promise((r) => child.on('exit', r));
  let ms;
  for (let i = 0; i < 20_000; i++) {
    if (existsSync(sock) && (await probe(sock))) {
      ms = Number(process.hrtime.bigint() - t0) / 1e6;
      break;
    }
    await sleep(1);
  }
  child.kill('SIGTERM');
  await exited;
  if (ms === undefined) throw new Error(`${c.name} never answered Probe`);
  return ms;
}

const samples = contenders.map(() => []);
for (const [k, c] of contenders.entries()) await once(c, k); // warm the page cache
for (let i = 0; i < runs; i++) {
  const order = i % 2 ? [1, 0] : [0, 1];
  for (const k of order) samples[k].push(await once(contenders[k], k));
}
rmSync(scratch, { recursive: true, force: true });

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const [csiMed, bareMed] = samples.map(median);
console.log(`CSI cold start to first Probe, ${runs} alternating runs each (NODE_EXTRA_CA_CERTS unset)`);
console.log('contender                        median ms   min ms   max ms');
contenders.forEach((c, k) => {
  console.log(`${c.name.padEnd(32)}${median(samples[k]).toFixed(1).padStart(10)}${Math.min(...samples[k]).toFixed(1).padStart(9)}${Math.max(...samples[k]).toFixed(1).padStart(9)}`);
});
console.log(`ratio twinvol-csi / bare: ${(csiMed / bareMed).toFixed(2)}x`);
