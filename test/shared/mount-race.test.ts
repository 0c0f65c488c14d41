import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Mounter } from '../../shared/mounter.js';
import { readMounts } from '../../shared/mountinfo.js';
import { startFlipper, stopFlipper } from '../helpers/flipper.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// Issue 8, defect 4: a target swapped for a symlink between the check and the mount landed the mount
// outside the kubelet dir. The mount is now made onto the opened object (shared/pinned-target.ts).
// TWINVOL_LONG=1 (npm run test:long) runs the 10,000 tries the issue asks for.
const TRIES = process.env.TWINVOL_LONG ? 10_000 : 2_000;

let s: Scratch;
let flipper: ChildProcess | undefined;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(async () => {
  try {
    await stopFlipper(flipper);
  } finally {
    flipper = undefined;
    // Whatever the flipper did, the scratch world's mounts and files go.
    s.cleanup();
  }
});

describe('a mount target flipped between a directory and a symlink while mounts are made', () => {
  it(`never lands a mount outside the kubelet dir (${TRIES} tries)`, { timeout: 30 * 60_000 }, async () => {
    const source = join(s.root, 'source');
    const outside = join(s.root, 'outside');
    const pod = join(s.kubeletDir, 'pods', 'uid-1');
    const target = join(pod, 'target');
    mkdirSync(source);
    mkdirSync(outside);
    mkdirSync(pod, { recursive: true });
    writeFileSync(join(source, 'secret'), 'x');
    // The attacker: a loop that keeps replacing the target with a link to outside and back.
    flipper = startFlipper(target, outside);

    // This suite's binds only: mountinfo names a bind by its path inside its filesystem, which ends with
    // the scratch dir's own name and "source" (other suites running beside this one bind "source" dirs too).
    const ownSource = `/${basename(s.root)}/source`;
    const mounter = new Mounter(10_000);
    let landed = 0;
    let escaped = 0;
    for (let i = 0; i < TRIES; i++) {
      await mounter.bind(source, { path: target, within: s.kubeletDir }, false).then(
        () => landed++,
        () => undefined,
      );
      for (const m of readMounts().filter((e) => e.root.endsWith(ownSource))) {
        if (!m.mountPoint.startsWith(`${s.kubeletDir}/`)) escaped++;
        execFileSync('umount', ['-l', '--', m.mountPoint]);
      }
    }
    expect(escaped).toBe(0);
    // The race was real: some tries found a directory and mounted, some were refused.
    expect(landed).toBeGreaterThan(0);
    expect(landed).toBeLessThan(TRIES);
  });
});
