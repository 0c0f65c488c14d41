import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'valibot';
import { afterAll, describe, expect, it } from 'vitest';
import { RECORD_SCHEMAS } from '../../shared/store/record-schemas.js';
import { FLEX_BIN, flexOptions, flexSession, mountOptions, podNamed } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, mountsUnder, recordLeftovers } from '../helpers/scratch.js';
import { fileSha256, writeRandomFile } from '../csi/helpers/data.js';
import { seededRandom, suiteSeed } from '../helpers/seeded-random.js';

/**
 * Crash at any point: a FlexVolume call is SIGKILLed after a random delay inside one verb of a volume's
 * life (attach, waitforattach, mountdevice, mount, unmount, unmountdevice, detach), as a node losing
 * power or kubelet's exec timeout would; then kubelet's retries run the rest of the life from that
 * verb. Every retry must succeed; afterwards nothing is left mounted or bound, every record parses,
 * the volume is detached, and the data written in every earlier life is intact. Short mode: 8 trials
 * with a fixed seed; `npm run test:long`: 500 trials with a fresh one (printed on failure).
 */
const LONG = process.env.TWINVOL_LONG === '1';
const TRIALS = Number(process.env.TWINVOL_CRASH_TRIALS ?? (LONG ? 500 : 8));
const SEED = suiteSeed();
/** Every life keeps its file, so 500 lives must fit the 32 MiB volume: 500 x 16 KiB is 8 MiB (64 KiB filled it). */
const LIFE_BYTES = 16 * 1024;

const s = createScratch('node-a');
afterAll(() => s.cleanup());
const { ok, createVolume } = flexSession(() => s.env);

/** Runs one call and kills it after `afterMs`; answers whether the kill came before it finished. */
function killedAfter(argv: string[], afterMs: number): Promise<boolean> {
  const child = spawn(FLEX_BIN, argv, { cwd: '/', stdio: 'ignore', env: { PATH: '/usr/bin:/bin', ...s.env } });
  const timer = setTimeout(() => child.kill('SIGKILL'), afterMs);
  return new Promise((done) =>
    child.on('exit', (_code, signal) => {
      clearTimeout(timer);
      done(signal === 'SIGKILL');
    }),
  );
}

function recordsParse(): void {
  const mounts = join(s.stateDir, 'mounts');
  for (const name of existsSync(mounts) ? readdirSync(mounts) : []) parse(RECORD_SCHEMAS.mount(), JSON.parse(readFileSync(join(mounts, name), 'utf8')));
  parse(RECORD_SCHEMAS.volume(), JSON.parse(readFileSync(join(s.dataRoot, 'volumes', 'crashy', 'volume.json'), 'utf8')));
}

describe(`crash at any point of a FlexVolume life (seed ${SEED}, ${TRIALS} trials)`, () => {
  it('the retries finish the life, nothing is left behind, and every earlier write is intact', { timeout: 60_000 + TRIALS * 20_000 }, async () => {
    await createVolume('crashy', '--size', '32Mi');
    const next = seededRandom(SEED);
    const opts = flexOptions('pv-crashy', { volumeId: 'crashy' });
    const global = deviceMountPath(s.kubeletDir, 'pv-crashy');
    const written = new Map<string, string>();
    let killed = 0;
    /** How long each verb took when it last ran whole (the first trial's kill falls in 250 ms). */
    const took = new Map<string, number>();
    for (let trial = 0; trial < TRIALS; trial++) {
      const dir = podVolumeDir(s.kubeletDir, `uid-${trial}`, 'pv-crashy');
      const life: string[][] = [
        ['attach', opts, 'node-a'],
        ['waitforattach', '', opts],
        ['mountdevice', global, '', opts],
        ['mount', dir, mountOptions('pv-crashy', podNamed(`uid-${trial}`), { volumeId: 'crashy' })],
        ['unmount', dir],
        ['unmountdevice', global],
        ['detach', 'pv-crashy', 'node-a'],
      ];
      const at = Math.floor(next() * life.length);
      const verb = life[at]?.[0] ?? '';
      // A point inside the call, however fast this machine runs it: a share of its last whole run.
      const afterMs = Math.floor(next() * (took.get(verb) ?? 250));
      const label = `trial ${trial}: ${verb} killed after ${afterMs} ms (seed ${SEED})`;
      for (let k = 0; k < life.length; k++) {
        const argv = life[k] ?? [];
        if (k === at && (await killedAfter(argv, afterMs))) killed++;
        const started = performance.now();
        await ok(...argv).catch((err: Error) => {
          throw new Error(`${label}: the ${argv[0]} after it failed: ${err.message}`);
        });
        took.set(argv[0] ?? '', performance.now() - started);
        // Inside the pod: every earlier life's data is there, and this life adds its own.
        if (argv[0] === 'mount') {
          for (const [name, sum] of written) expect(fileSha256(join(dir, name)), `${label}: ${name}`).toBe(sum);
          written.set(`life-${trial}.bin`, writeRandomFile(join(dir, `life-${trial}.bin`), LIFE_BYTES));
        }
      }
      expect(mountsUnder(s.kubeletDir), label).toEqual([]);
      expect(await loopsLeftUnder(s.root), label).toEqual([]);
      recordsParse();
      const volume = parse(RECORD_SCHEMAS.volume(), JSON.parse(readFileSync(join(s.dataRoot, 'volumes', 'crashy', 'volume.json'), 'utf8')));
      expect(volume.attachments, label).toEqual([]);
      // A killed writer's temporary record file is swept by the retry's write (shared/store/json-record.ts).
      expect(recordLeftovers(s, 'crashy'), label).toEqual([]);
    }
    // Some calls finish before their kill; over many trials a good share must really cut one short.
    if (TRIALS >= 30) expect(killed).toBeGreaterThanOrEqual(Math.ceil(TRIALS / 3));
  });
});
