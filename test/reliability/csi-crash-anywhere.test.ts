import { mkdirSync, readdirSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Catalog } from '../../shared/store/catalog.js';
import { loopsLeftUnder, mountsUnder, recordLeftovers } from '../helpers/scratch.js';
import { outcome } from '../csi/helpers/client.js';
import { fileSha256, writeRandomFile } from '../csi/helpers/data.js';
import { MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { createCsiScratch } from '../csi/helpers/scratch.js';
import { launchCsi, type RunningCsi } from '../csi/helpers/server.js';
import { seededRandom, suiteSeed } from '../helpers/seeded-random.js';

/**
 * Crash at any point, CSI side: the server is SIGKILLed after a random delay inside one RPC of a
 * volume's life (CreateVolume to DeleteVolume, snapshots included); a new server starts on the same
 * state and the sidecars' retries run the rest of the life from that RPC. Every retry must succeed;
 * afterwards nothing is mounted, bound or left in the work area, and the data of every earlier life
 * is in the volume. Short mode: 4 trials with a fixed seed; test:long: 100 (TWINVOL_CRASH_TRIALS).
 */
const LONG = process.env.TWINVOL_LONG === '1';
const TRIALS = Number(process.env.TWINVOL_CRASH_TRIALS ?? (LONG ? 500 : 4));
const SEED = suiteSeed();
/** Every life keeps its file, so 500 lives must fit the 32 MiB volume: 500 x 16 KiB is 8 MiB (64 KiB filled it). */
const LIFE_BYTES = 16 * 1024;

const s = createCsiScratch('node-a');
let server: RunningCsi | undefined;
afterAll(async () => {
  await server?.stop();
  s.cleanup();
});

type Step = [service: 'Controller' | 'Node', method: string, request: Record<string, unknown>];

describe(`crash at any point of a CSI life (seed ${SEED}, ${TRIALS} trials)`, () => {
  it('a restarted server finishes the life on the retries, and nothing is lost or left', { timeout: 60_000 + TRIALS * 20_000 }, async () => {
    const next = seededRandom(SEED);
    const cap = mountCap('ext4');
    const written = new Map<string, string>();
    let cut = 0;
    /** How long each RPC took when it last ran whole (the first trial's kill falls in 60 ms). */
    const took = new Map<string, number>();
    server = await launchCsi(s);
    for (let trial = 0; trial < TRIALS; trial++) {
      const staging = stagingPath(s.kubeletDir, 'vol');
      const target = targetPath(s.kubeletDir, `pod-${trial}`, 'vol');
      mkdirSync(staging, { recursive: true });
      mkdirSync(dirname(target), { recursive: true });
      const life: Step[] = [
        ['Controller', 'CreateVolume', { name: 'vol', volume_capabilities: [cap], capacity_range: size(32 * MiB) }],
        ['Controller', 'ControllerPublishVolume', { volume_id: 'vol', node_id: 'node-a', volume_capability: cap }],
        ['Node', 'NodeStageVolume', { volume_id: 'vol', staging_target_path: staging, volume_capability: cap }],
        ['Node', 'NodePublishVolume', { volume_id: 'vol', staging_target_path: staging, target_path: target, volume_capability: cap }],
        ['Controller', 'CreateSnapshot', { name: `snap-${trial}`, source_volume_id: 'vol' }],
        ['Node', 'NodeUnpublishVolume', { volume_id: 'vol', target_path: target }],
        ['Node', 'NodeUnstageVolume', { volume_id: 'vol', staging_target_path: staging }],
        ['Controller', 'ControllerUnpublishVolume', { volume_id: 'vol', node_id: 'node-a' }],
        ['Controller', 'DeleteSnapshot', { snapshot_id: `snap-${trial}` }],
      ];
      const at = Math.floor(next() * life.length);
      const killedMethod = life[at]?.[1] ?? '';
      // A point inside the RPC, however fast this machine answers it: a share of its last whole run.
      const afterMs = next() * (took.get(killedMethod) ?? 60);
      const label = `trial ${trial}: ${killedMethod} killed after ${afterMs.toFixed(1)} ms (seed ${SEED})`;
      for (let k = 0; k < life.length; k++) {
        const [service, method, request] = life[k] as Step;
        if (k === at) {
          const running = server;
          const reply = outcome(running.client.call(service, method as never, request as never));
          await new Promise((r) => setTimeout(r, afterMs));
          running.child.kill('SIGKILL');
          if ((await reply).code !== 'OK') cut++;
          await running.stop();
          server = await launchCsi(s);
        }
        const started = performance.now();
        const o = await outcome(server.client.call(service, method as never, request as never));
        took.set(method, performance.now() - started);
        expect(`${method}: ${o.code} ${o.message}`, label).toBe(`${method}: OK `);
        if (method === 'NodePublishVolume') {
          for (const [name, sum] of written) expect(fileSha256(join(target, name)), `${label}: ${name}`).toBe(sum);
          written.set(`life-${trial}.bin`, writeRandomFile(join(target, `life-${trial}.bin`), LIFE_BYTES));
        }
      }
      expect(mountsUnder(s.kubeletDir), label).toEqual([]);
      expect(await loopsLeftUnder(s.root), label).toEqual([]);
      const catalog = new Catalog(s.dataRoot);
      expect((await catalog.requireVolume('vol')).attachments, label).toEqual([]);
      expect(await catalog.listSnapshotIds(), label).toEqual([]);
      const work = join(s.dataRoot, '.work');
      expect(existsSync(work) ? readdirSync(work) : [], label).toEqual([]);
      expect(recordLeftovers(s, 'vol'), label).toEqual([]);
    }
    // Some RPCs answer before their kill; over many trials a good share must really cut one short.
    if (TRIALS >= 30) expect(cut).toBeGreaterThanOrEqual(Math.ceil(TRIALS / 3));
  });
});
