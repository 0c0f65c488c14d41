import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createVolume } from '../../shared/core/volumes.js';
import { coreIn } from '../shared/core-scratch.js';
import { useCsiServer } from './helpers/fixture.js';
import { metricsPort, scrape, series } from './metrics-scrape.js';

/**
 * The volume gauge is computed from the catalog at each scrape (csi/metrics.ts VolumeCounter): it
 * counts every record of a large catalog exactly, and the time a scrape takes is printed (a figure
 * for docs/architecture.md, not an assertion: these machines are shared). 1,000 volumes in the long
 * run, 200 by default.
 */
const VOLUMES = process.env.TWINVOL_LONG ? 1000 : 200;
const SCRAPES = 5;
const csi = useCsiServer({ args: ['--metrics-address', '127.0.0.1:0'] });
let port = 0;
beforeAll(async () => {
  port = await metricsPort(csi.server);
});
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

/** The first scrape (each record read) and the median of the next ones (records unchanged: one stat each). */
async function timedScrapes(): Promise<{ cold: number; ms: number; samples: Awaited<ReturnType<typeof scrape>> }> {
  const times: number[] = [];
  const first = performance.now();
  let samples = await scrape(port);
  const cold = performance.now() - first;
  for (let i = 0; i < SCRAPES; i++) {
    const started = performance.now();
    samples = await scrape(port);
    times.push(performance.now() - started);
  }
  return { cold, ms: median(times), samples };
}

describe(`the volume gauge over ${VOLUMES} volumes`, () => {
  let empty = 0;

  it('counts each one, by backend and state', async () => {
    empty = (await timedScrapes()).ms;
    const core = coreIn(csi.s);
    for (let i = 0; i < VOLUMES; i++)
      await createVolume(core, { id: `scale-${String(i).padStart(4, '0')}`, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
    const { cold, ms, samples } = await timedScrapes();
    expect(samples.get(series('twinvol_volumes', { backend: 'dir', state: 'detached' }))).toBe(VOLUMES);
    expect(samples.get(series('twinvol_volumes', { backend: 'block', state: 'detached' }))).toBe(0);
    console.log(`scrape over HTTP: ${empty.toFixed(1)} ms with no volume; with ${VOLUMES}: ${cold.toFixed(1)} ms the first time, then ${ms.toFixed(1)} ms (median of ${SCRAPES})`);
  });

  it('a record that does not parse is counted as unreadable, and the scrape still answers', async () => {
    writeFileSync(join(csi.s.dataRoot, 'volumes', 'scale-0000', 'volume.json'), '{ not json');
    const samples = await scrape(port);
    expect(samples.get(series('twinvol_volumes', { backend: 'unknown', state: 'unreadable' }))).toBe(1);
    expect(samples.get(series('twinvol_volumes', { backend: 'dir', state: 'detached' }))).toBe(VOLUMES - 1);
  });

  it('a catalog that cannot be listed leaves the volume series out, and the rest of the scrape answers', async () => {
    const volumes = join(csi.s.dataRoot, 'volumes');
    renameSync(volumes, `${volumes}.away`);
    try {
      // A file where the directory was: listing it fails with ENOTDIR, for real.
      writeFileSync(volumes, '');
      const samples = await scrape(port);
      expect([...samples.keys()].filter((k) => k.startsWith('twinvol_volumes'))).toEqual([]);
      expect(samples.get('process_cpu_user_seconds_total')).toBeGreaterThan(0);
    } finally {
      rmSync(volumes, { force: true });
      renameSync(`${volumes}.away`, volumes);
    }
    expect((await scrape(port)).get(series('twinvol_volumes', { backend: 'dir', state: 'detached' }))).toBe(VOLUMES - 1);
  });
});
