import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readMounts } from '../../shared/mountinfo.js';

/** A private world for one suite: data root, node state, kubelet dir, all under one temp dir. */
export interface Scratch {
  root: string;
  dataRoot: string;
  stateDir: string;
  kubeletDir: string;
  /** Environment for processes that should use this world. */
  env: Record<string, string>;
  cleanup(): void;
}

export function createScratch(nodeName = 'node-a', prefix = '/tmp/twinvol-test-'): Scratch {
  const root = mkdtempSync(prefix);
  const dataRoot = join(root, 'data');
  const stateDir = join(root, 'state');
  const kubeletDir = join(root, 'kubelet');
  mkdirSync(kubeletDir, { recursive: true });
  writeFileSync(join(root, 'config.json'), '{}\n');
  return {
    root,
    dataRoot,
    stateDir,
    kubeletDir,
    env: {
      TWINVOL_DATA_ROOT: dataRoot,
      TWINVOL_STATE_DIR: stateDir,
      TWINVOL_KUBELET_DIR: kubeletDir,
      TWINVOL_NODE_NAME: nodeName,
      // Point the config file away from the machine's /etc/twinvol.
      TWINVOL_CONFIG: join(root, 'config.json'),
    },
    cleanup: () => releaseUnder(root),
  };
}

/** Mount points at or below `root`, deepest first. */
export function mountsUnder(root: string): string[] {
  return readMounts()
    .map((m) => m.mountPoint)
    .filter((p) => p === root || p.startsWith(`${root}/`))
    .sort((a, b) => b.length - a.length);
}

/** Loop devices whose backing file lies below `root`. */
export function loopsUnder(root: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync('/sys/block').filter((n) => n.startsWith('loop'))) {
    try {
      const backing = readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim();
      if (backing.startsWith(`${root}/`)) out.push(`/dev/${name}`);
    } catch {
      // not bound
    }
  }
  return out;
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
 * record file (`<record>.<number>`, write-file-atomic's) of the volume's catalog record or of any mount
 * record. Empty when clean.
 */
export function recordLeftovers(s: Scratch, volumeId: string): string[] {
  const list = (dir: string) => (existsSync(dir) ? readdirSync(dir).map((n) => join(dir, n)) : []);
  const mountRecords = list(join(s.stateDir, 'mounts'));
  const catalogTemps = list(join(s.dataRoot, 'volumes', volumeId)).filter((p) => /\.json\.\d+$/.test(p));
  return [...mountRecords, ...catalogTemps];
}
