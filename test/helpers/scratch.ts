import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loopsUnder, mountsUnder, type ScratchWorld, worldIn } from '../../flex/scratch-world.js';

/** A private world for one suite (flex/scratch-world.ts), removed again by `cleanup`. */
export interface Scratch extends ScratchWorld {
  /** Synchronous, for afterAll/afterEach hooks and finally blocks (flex/scratch-world.ts releaseWorld is the runner's way). */
  cleanup(): void;
}

export function createScratch(nodeName = 'node-a', prefix = '/tmp/twinvol-test-'): Scratch {
  const world = worldIn(mkdtempSync(prefix), nodeName);
  return { ...world, cleanup: () => releaseUnder(world.root) };
}

export { loopsUnder, mountsUnder };

/** A block device's sysfs attribute (`size`, `loop/autoclear`, ...: /sys/block/<name>/<attribute>), trimmed. */
export function blockAttribute(device: string, attribute: string): string {
  return readFileSync(`/sys/block/${device.replace(/^\/dev\//, '')}/${attribute}`, 'utf8').trim();
}

/** A loop device's own attribute (`autoclear`, `backing_file`, ...: /sys/block/loopN/loop/<name>). */
export function loopAttribute(device: string, name: string): string {
  return blockAttribute(device, `loop/${name}`);
}

/**
 * The loop devices under `root` once the kernel has settled: a device detached while a copy of the
 * mount namespace (another test's process, a lazy unmount) still holds it is only autocleared when the
 * last reference drops, asynchronously. Polls until none is left or the deadline passes, then answers
 * what is still bound, so a real leak still fails the caller's assertion.
 */
export async function loopsLeftUnder(root: string, deadlineMs = 10_000): Promise<string[]> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const loops = loopsUnder(root);
    if (!loops.length || Date.now() >= until) return loops;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Unmounts everything below `root`, detaches its loop devices and removes it: run in afterAll/afterEach
 * so a failing test leaves nothing on the machine. Lazy unmounts cannot fail on a busy mount.
 */
export function releaseUnder(root: string): void {
  for (let pass = 0; pass < 5; pass++) {
    const mounts = mountsUnder(root);
    if (!mounts.length) break;
    for (const m of mounts) {
      try {
        execFileSync('umount', ['-l', m], { stdio: 'ignore' });
      } catch {
        // already gone
      }
    }
  }
  for (const dev of loopsUnder(root)) {
    try {
      execFileSync('losetup', ['-d', dev], { stdio: 'ignore' });
    } catch {
      // already detached
    }
  }
  rmSync(root, { recursive: true, force: true });
}

/**
 * What a finished volume life must not leave in the scratch's state: a mount record, or a temporary
 * record file (`<record>.<number>`, shared/store/json-record.ts) of the volume's catalog record or of any mount
 * record. Empty when clean.
 */
export function recordLeftovers(s: Scratch, volumeId: string): string[] {
  const list = (dir: string) => (existsSync(dir) ? readdirSync(dir).map((n) => join(dir, n)) : []);
  const mountRecords = list(join(s.stateDir, 'mounts'));
  const catalogTemps = list(join(s.dataRoot, 'volumes', volumeId)).filter((p) => /\.json\.\d+$/.test(p));
  return [...mountRecords, ...catalogTemps];
}
