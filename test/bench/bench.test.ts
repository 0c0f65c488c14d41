import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

/**
 * The benchmark suite in its short mode, so it cannot rot: every row it promises is there, each a
 * positive ratio to a reference measured in the same run. Timings are never asserted here: on a shared
 * machine they say nothing about the code (scripts/bench.mjs).
 */
const ROOT = resolve(import.meta.dirname, '../..');

interface BenchRow {
  suite: string;
  id: string;
  name: string;
  value: number;
  unit: string;
  reference: number;
  referenceName: string;
  ratio: number;
}

const LIFECYCLE = ['CreateVolume', 'ControllerPublishVolume', 'NodeStageVolume', 'NodePublishVolume', 'NodeGetVolumeStats', 'NodeUnpublishVolume', 'NodeUnstageVolume', 'ControllerUnpublishVolume', 'DeleteVolume'];
/** What scripts/bench/bare-grpc-server.cjs --durable does the work of. */
const DURABLE = ['CreateVolume', 'ControllerPublishVolume', 'ControllerUnpublishVolume', 'DeleteVolume'];
const READS = ['Probe', 'GetPluginInfo', 'NodeGetCapabilities', 'ControllerGetVolume', 'ValidateVolumeCapabilities', 'ListVolumes', 'GetCapacity'];
const EXPECTED = [
  ...['init', 'getvolumename', 'isattached', 'dir-mount', 'dir-unmount', 'block-lifecycle', 'init-node'].map((v) => `flex.bundle.${v}`),
  'csi.cold-start',
  'csi.rss.idle',
  'csi.rss.loaded',
  'csi.lifecycle.dir',
  'csi.lifecycle.block',
  'exec.lifecycle',
  'exec.rpc.NodePublishVolume.p50',
  'exec.rpc.NodeUnpublishVolume.p50',
  ...[...LIFECYCLE, ...READS].flatMap((m) => [`csi.rpc.${m}.p50`, `csi.rpc.${m}.p99`]),
  ...DURABLE.flatMap((m) => [`csi.rpc.${m}.p50.durable`, `csi.durable.${m}.p50`]),
  'scale.list.first-page',
  'scale.list.full',
  'scale.throughput.16',
  'scale.throughput.16.probed',
  'scale.probe-under-load',
  'scale.probe-under-load.bare',
  'scale.mounts.lifecycle',
  'csi.rss.growth',
];
/** The rows against the Go reference driver, there only when the run is given one (scripts/bench/csi-reference.mjs). */
const REFERENCE = [
  'reference.cold-start',
  'reference.lifecycle.dir',
  'reference.lifecycle.block',
  'reference.throughput.16',
  ...LIFECYCLE.map((m) => `reference.rpc.${m}.p50`),
];

it('npm run bench -- --short --json prints every row, each a positive ratio to its reference', async () => {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  const { stdout } = await promisify(execFile)(process.execPath, ['scripts/bench.mjs', '--short', '--json'], { cwd: ROOT, env, maxBuffer: 64 * 2 ** 20 });
  const report = JSON.parse(stdout) as { machine: string; short: boolean; rows: BenchRow[] };
  expect(report.short).toBe(true);
  expect(report.machine).toMatch(/\d+ x .+, \d+ GiB/);
  const ids = report.rows.map((r) => r.id);
  const expected = env.TWINVOL_BENCH_HOSTPATH ? [...EXPECTED, ...REFERENCE] : EXPECTED;
  expect(ids.filter((id) => !expected.includes(id) && !id.startsWith('flex.'))).toEqual([]);
  for (const id of expected) expect(ids, `row ${id}`).toContain(id);
  expect(new Set(ids).size).toBe(ids.length);
  for (const r of report.rows) {
    expect(r.name, r.id).not.toBe('');
    expect(r.unit, r.id).not.toBe('');
    expect(r.referenceName, r.id).not.toBe('');
    for (const v of [r.value, r.reference, r.ratio]) {
      expect(Number.isFinite(v) && v > 0, `${r.id}: ${JSON.stringify(r)}`).toBe(true);
    }
    expect(r.ratio).toBeCloseTo(r.value / r.reference, 6);
  }
}, 600_000);
