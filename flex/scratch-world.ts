import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { loopDevices, readMounts, run } from '../shared/index.js';

/**
 * A private kubelet-style world under one directory: its own data root, node state and kubelet dir,
 * an empty config file (so the machine's /etc/twinvol never applies), and the environment that points
 * twinvol's executables at it. `twinvol compare`, the demo and the tests (test/helpers/scratch.ts) play
 * kubelet in one, so that nothing they do touches the node's real volumes.
 */
export interface ScratchWorld {
  root: string;
  dataRoot: string;
  stateDir: string;
  kubeletDir: string;
  /** Environment for processes that should use this world. */
  env: Record<string, string>;
}

/** Lays a world out in `root`, an existing empty directory. */
export function worldIn(root: string, nodeName: string): ScratchWorld {
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
    env: { TWINVOL_DATA_ROOT: dataRoot, TWINVOL_STATE_DIR: stateDir, TWINVOL_KUBELET_DIR: kubeletDir, TWINVOL_NODE_NAME: nodeName, TWINVOL_CONFIG: join(root, 'config.json') },
  };
}

/** Mount points at or below `root`, deepest first. */
export function mountsUnder(root: string): string[] {
  return readMounts()
    .map((m) => m.mountPoint)
    .filter((p) => p === root || p.startsWith(`${root}/`))
    .sort((a, b) => b.length - a.length);
}

/** Loop devices whose backing file lies below `root` (sysfs: shared/loop-devices.ts). */
export function loopsUnder(root: string): string[] {
  return loopDevices()
    .filter((l) => l.backingFile.startsWith(`${root}/`))
    .map((l) => l.device);
}

const TOOL_MS = 30_000;

/**
 * Unmounts everything below `root` (lazily, so a busy mount cannot stop it), detaches its loop devices
 * and removes it, through the project's one runner: whatever a failed run left. The tests' synchronous
 * twin for afterAll hooks is releaseUnder in test/helpers/scratch.ts.
 */
export async function releaseWorld(root: string): Promise<void> {
  for (let pass = 0; pass < 5 && mountsUnder(root).length; pass++)
    for (const m of mountsUnder(root)) await run('umount', ['-l', '--', m], { timeoutMs: TOOL_MS }).catch(() => undefined);
  for (const dev of loopsUnder(root)) await run('losetup', ['-d', dev], { timeoutMs: TOOL_MS }).catch(() => undefined);
  // Never recursively remove a tree something is still mounted in: that would delete a volume's data.
  const left = mountsUnder(root);
  if (left.length) throw new Error(`could not unmount ${left.join(', ')}; ${root} is left in place`);
  rmSync(root, { recursive: true, force: true });
}

/**
 * The twinvol-csi that `compare` and `migrate verify` start privately: beside this executable, as the
 * image installs both in /usr/local/bin (deploy/image/Containerfile), else where `npm run build` puts
 * it (dist/csi/twinvol-csi from dist/flex/twinvol). Undefined: in neither place.
 */
export function csiServerNear(executable: string): string | undefined {
  return [join(dirname(executable), 'twinvol-csi'), join(dirname(executable), '../csi/twinvol-csi')].find((path) => existsSync(path));
}
