import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { Catalog } from '../../shared/store/catalog.js';
import { NodeState } from '../../shared/store/node-state.js';
import { deviceSha256, fileSha256, writeRandomDevice, writeRandomFile } from '../csi/helpers/data.js';
import { loopsLeftUnder, loopsUnder, mountsUnder, type Scratch } from './scratch.js';

/** How many reboots in a row the set-up-again tests make: 20 with test:long, 2 otherwise. */
export const REBOOTS = process.env.TWINVOL_LONG === '1' ? 20 : 2;
/**
 * Their deadline, per reboot rather than the default per test: alone a reboot and set-up again take
 * under a second, but test:long may run them beside the 3-minute load suite
 * (test/reliability/load.test.ts), which saturates the machine by design and once made 20 reboots
 * take over 120 s.
 */
export const REBOOTS_TIMEOUT = { timeout: Math.max(120_000, 60_000 + REBOOTS * 15_000) };

/**
 * A node reboot as the kernel sees it, confined to one scratch world: every mount below its root is
 * gone (lazily, as a busy one would be), every loop device bound to an image below it is detached and
 * released by the kernel, and the state dir, a tmpfs on a real node, is empty. The data root and the
 * kubelet dir are disks: they stay, with the mount points kubelet and twinvol made in them.
 */
export async function rebootNode(s: Scratch): Promise<void> {
  for (const m of mountsUnder(s.root)) execFileSync('umount', ['-l', m]);
  if (mountsUnder(s.root).length) throw new Error(`mounts survived the reboot: ${mountsUnder(s.root).join(', ')}`);
  // A lazily unmounted filesystem still holds its device: losetup -d only marks it for autoclear.
  for (const d of loopsUnder(s.root)) execFileSync('losetup', ['-d', d]);
  const held = await loopsLeftUnder(s.root);
  if (held.length) throw new Error(`the kernel never released ${held.join(', ')}: the reboot did not happen`);
  rmSync(s.stateDir, { recursive: true, force: true });
}

/** Nothing of twinvol's is left on the node: no mount, no loop device, no mount record. */
export async function expectNodeClean(s: Scratch, label = ''): Promise<void> {
  expect(mountsUnder(s.root), `${label} mounts`).toEqual([]);
  expect(await loopsLeftUnder(s.root), `${label} loop devices`).toEqual([]);
  expect(await new NodeState(s.stateDir).listAll(), `${label} mount records`).toEqual([]);
}

/** The nodes the catalog says hold the volume (fenced ones included: they keep other nodes out too). */
export async function attachedNodes(s: Scratch, id: string): Promise<string[]> {
  return (await new Catalog(s.dataRoot).requireVolume(id)).attachments.map((a) => a.node);
}

/** The volumes the catalog still holds. */
export function volumesInCatalog(s: Scratch): Promise<readonly string[]> {
  return new Catalog(s.dataRoot).listVolumeIds();
}

/** What a pod sees of a volume: a directory, or (raw block) a device file; read-only or not. */
export interface PodView {
  path: string;
  raw?: boolean;
  readonly?: boolean;
}

export const DATA_BYTES = 256 * 1024;
const DATA_FILE = 'data.bin';

/** Writes fresh random data where the pod sees the volume, flushed to it; returns the checksum. */
export function writePodData(view: PodView): string {
  return view.raw ? writeRandomDevice(view.path, DATA_BYTES) : writeRandomFile(join(view.path, DATA_FILE), DATA_BYTES);
}

/** The pod sees the data with `sum`, and a read-only pod cannot write. */
export function expectPodData(view: PodView, sum: string, label = ''): void {
  expect(view.raw ? deviceSha256(view.path, DATA_BYTES) : fileSha256(join(view.path, DATA_FILE)), `${label} ${view.path}`).toBe(sum);
  if (view.readonly && !view.raw) expect(() => writeFileSync(join(view.path, 'probe'), 'x'), `${label} ${view.path} is read-only`).toThrow(/EROFS|read-only/);
}

/** Fresh data where each pod sees its volume, then `sync`: what a reboot must not lose. The checksums, in order. */
export function syncedPodData(views: PodView[]): string[] {
  const sums = views.map(writePodData);
  execFileSync('sync');
  return sums;
}
