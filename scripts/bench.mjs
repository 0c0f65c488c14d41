// The benchmark suite: every module in scripts/bench/ that exports a `suite` adds rows, and this
// prints them as one table (or, with --json, one JSON document on stdout). Every figure is a ratio
// to a reference measured side by side in the same run: interleaved rounds, medians, and
// NODE_EXTRA_CA_CERTS unset on both sides (scripts/bench/lib.mjs). Timings are reported, never asserted.
//   node scripts/bench.mjs [--json] [--short | --long] [--only=<suite title substring>]
// --short runs few rounds at small sizes (CI: test/bench/bench.test.ts checks the rows' shape);
// --long runs the sizes that take minutes (memory over 10,000 lifecycles).
// npm run bench builds dist/ first.
import { readdirSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const argv = process.argv.slice(2);
const json = argv.includes('--json');
const short = argv.includes('--short');
const long = !short && argv.includes('--long');
const only = argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);
delete process.env.NODE_EXTRA_CA_CERTS;

const dir = join(import.meta.dirname, 'bench');
const suites = [];
// A *.child.mjs module is a process a suite starts (scripts/bench/prober.child.mjs), not a suite.
for (const file of readdirSync(dir).filter((f) => f.endsWith('.mjs') && !f.endsWith('.child.mjs')).sort()) {
  const mod = await import(pathToFileURL(join(dir, file)).href);
  if (mod.suite) suites.push({ file, ...mod.suite });
}
suites.sort((a, b) => (a.order ?? 50) - (b.order ?? 50));

const machine = `${cpus().length} x ${cpus()[0]?.model ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Linux, Node ${process.version}`;
const started = Date.now();
const rows = [];
for (const s of suites) {
  if (only && !s.title.toLowerCase().includes(only.toLowerCase())) continue;
  for (const r of await s.run({ short, long })) rows.push({ suite: s.title, ...r });
}

if (json) {
  process.stdout.write(`${JSON.stringify({ machine, short, seconds: Math.round((Date.now() - started) / 1000), rows }, null, 2)}\n`);
} else {
  const fmt = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
  const width = Math.max(...rows.map((r) => r.name.length), 10) + 2;
  console.log(`twinvol benchmarks${short ? ' (short)' : ''} on ${machine}`);
  console.log(`${'row'.padEnd(width)}${'value'.padStart(10)}  ${'unit'.padEnd(13)}${'reference'.padStart(10)}  ${'ratio'.padStart(7)}  reference is`);
  for (const r of rows)
    console.log(`${r.name.padEnd(width)}${fmt(r.value).padStart(10)}  ${r.unit.padEnd(13)}${fmt(r.reference).padStart(10)}  ${`${r.ratio.toFixed(2)}x`.padStart(7)}  ${r.referenceName}`);
}
