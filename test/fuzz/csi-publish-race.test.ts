import { type ChildProcess, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMounts } from '../../shared/mountinfo.js';
import { outcome } from '../csi/helpers/client.js';
import { useCsiServer } from '../csi/helpers/fixture.js';
import { type ReadyVolume, stagedVolume } from '../csi/helpers/pod-mount.js';
import { mountCap } from '../csi/helpers/requests.js';
import { startFlipper, stopFlipper } from '../helpers/flipper.js';

/**
 * The mount race of test/shared/mount-race.test.ts, through the CSI server: NodePublishVolume of a
 * staged dir volume and a staged block volume while another process flips the target between a
 * directory and a symlink to a directory outside the kubelet dir. The core mounts onto the object it
 * opened and checked (shared/pinned-target.ts), so no try may leave a mount whose mount point is outside
 * the kubelet dir, and the outside dir never sees the volume's files. Each try is unpublished after.
 * Short mode: 200 tries (100 per volume); `npm run test:long`: 10,000.
 */
const TRIES = process.env.TWINVOL_LONG === '1' ? 10_000 : 200;
const MARKER = 'volume-marker';

const csi = useCsiServer({ nodeId: 'node-a' });
let flipper: ChildProcess | undefined;
// Registered after the fixture's hooks, so it runs before them: the flipper goes before the cleanup.
afterAll(() => stopFlipper(flipper));

let outside: string;
const volumes: { name: string; v: ReadyVolume; id: string }[] = [];

beforeAll(async () => {
  outside = join(csi.s.root, 'outside');
  mkdirSync(outside);
  for (const [id, backend, fs] of [['race-dir', 'dir', ''], ['race-blk', 'block', 'ext4']] as const) {
    const v = await stagedVolume(csi, id, { backend, cap: mountCap(fs) });
    // The staging mount is the volume's root: a file there shows wherever the volume is mounted.
    writeFileSync(join(v.staging, MARKER), id);
    volumes.push({ name: backend, v, id });
  }
});

describe('NodePublishVolume while the target flips between a directory and a symlink out', () => {
  it(`never mounts outside the kubelet dir (${TRIES} tries)`, { timeout: 60 * 60_000 }, async () => {
    const escapes: string[] = [];
    const counts: Record<string, Record<string, number>> = {};
    const samples = new Set<string>();
    for (const { name, v, id } of volumes) {
      const target = v.target(`pod-race-${name}`);
      mkdirSync(dirname(target), { recursive: true });
      const tally: Record<string, number> = (counts[name] = {});
      flipper = startFlipper(target, outside);
      for (let i = 0; i < TRIES / volumes.length; i++) {
        const o = await outcome(csi.node('NodePublishVolume', { volume_id: id, staging_target_path: v.staging, target_path: target, volume_capability: v.cap }));
        tally[o.code] = (tally[o.code] ?? 0) + 1;
        if (o.code !== 'OK') samples.add(`${o.code} ${o.message.replaceAll(csi.s.root, '<root>')}`);
        // The kernel reports a mount point as the path it resolved to, symlinks followed.
        for (const m of readMounts()) {
          const p = m.mountPoint;
          if (p === outside || p.startsWith(`${outside}/`) || (p.startsWith(`${csi.s.root}/`) && !p.startsWith(`${csi.s.kubeletDir}/`) && !p.startsWith(`${csi.s.stateDir}/`)))
            escapes.push(`${name} try ${i}: mounted at ${p}`);
        }
        if (readdirSync(outside).length) escapes.push(`${name} try ${i}: ${readdirSync(outside).join(', ')} in the outside dir`);
        await outcome(csi.node('NodeUnpublishVolume', { volume_id: id, target_path: target }));
        // An unpublish that met the symlink leaves the mount for this pass to take down by hand.
        for (const m of readMounts().filter((e) => e.mountPoint === target)) execFileSync('umount', ['-l', '--', m.mountPoint]);
        if (escapes.length) break;
      }
      await stopFlipper(flipper);
      flipper = undefined;
    }
    console.log(`publish race: ${JSON.stringify(counts)}\n${[...samples].join('\n')}`);
    expect(escapes).toEqual([]);
    expect(existsSync(join(outside, MARKER))).toBe(false);
    // The race was real: for each volume some tries found a directory and mounted, some were refused.
    for (const name of Object.keys(counts)) {
      expect(counts[name]!.OK ?? 0, name).toBeGreaterThan(0);
      expect(Object.entries(counts[name]!).filter(([c]) => c !== 'OK').length, name).toBeGreaterThan(0);
    }
  });
});
