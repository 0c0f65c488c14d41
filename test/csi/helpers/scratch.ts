import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readMounts } from '../../../shared/mountinfo.js';

/** A private world for one suite's CSI server: its socket, data root, node state and kubelet dir. */
export interface CsiScratch {
  root: string;
  socketPath: string;
  dataRoot: string;
  stateDir: string;
  kubeletDir: string;
  /** An empty TWINVOL_CONFIG, so the machine's /etc/twinvol never leaks in. */
  configPath: string;
  /** The same world for code run in the test process (core verbs, loadConfig). */
  env: Record<string, string>;
  /** Unmounts, detaches and deletes everything below root; safe to call twice. */
  cleanup(): void;
}

export function createCsiScratch(nodeId: string): CsiScratch {
  const root = mkdtempSync('/tmp/twinvol-csi-test-');
  const s = {
    root,
    socketPath: join(root, 'plugin/csi.sock'),
    dataRoot: join(root, 'data'),
    stateDir: join(root, 'state'),
    kubeletDir: join(root, 'kubelet'),
    configPath: join(root, 'config.json'),
  };
  mkdirSync(s.kubeletDir, { recursive: true });
  writeFileSync(s.configPath, '{}\n');
  return {
    ...s,
    env: {
      TWINVOL_CONFIG: s.configPath,
      TWINVOL_DATA_ROOT: s.dataRoot,
      TWINVOL_STATE_DIR: s.stateDir,
      TWINVOL_KUBELET_DIR: s.kubeletDir,
      TWINVOL_NODE_NAME: nodeId,
    },
    cleanup: () => releaseAll(root),
  };
}

/** Mount points at or below `root`, deepest first. */
export function mountsBelow(root: string): string[] {
  return readMounts()
    .map((m) => m.mountPoint)
    .filter((p) => p === root || p.startsWith(`${root}/`))
    .sort((a, b) => b.length - a.length);
}

/** Loop devices backed by a file below `root`, from sysfs (which also sees deleted backing files). */
export function loopsBelow(root: string): string[] {
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

function quietly(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return '';
  }
}

/** Image files below `dir`, for `losetup -j`. */
function imagesBelow(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((n) => {
    const p = join(dir, n);
    try {
      const st = statSync(p);
      if (st.isDirectory()) return imagesBelow(p);
      return n.endsWith('.img') ? [p] : [];
    } catch {
      return [];
    }
  });
}

/**
 * The after-all safety net, run even when a test failed halfway: lazy recursive unmounts (a busy
 * mount cannot make it fail), then every loop device on an image below root (losetup -j, plus sysfs
 * for images already deleted), then the tree.
 */
export function releaseAll(root: string): void {
  for (let pass = 0; pass < 5 && mountsBelow(root).length; pass++)
    for (const m of mountsBelow(root)) quietly('umount', ['-R', '-l', m]);
  const fromLosetup = imagesBelow(root).flatMap((img) =>
    quietly('losetup', ['-j', img])
      .split('\n')
      .map((line) => line.split(':')[0] ?? '')
      .filter(Boolean),
  );
  for (const dev of new Set([...fromLosetup, ...loopsBelow(root)])) quietly('losetup', ['-d', dev]);
  rmSync(root, { recursive: true, force: true });
}
