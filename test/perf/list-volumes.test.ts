import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { type Core, openCore } from '../../shared/core/core.js';
import { createVolume, deleteVolume } from '../../shared/core/volumes.js';
import { COARSE_SETTLED_MS, FINE_SETTLED_MS, isLocalFilesystem } from '../../shared/store/filesystem.js';
import { useScratchCore } from '../shared/core-scratch.js';
import type { Scratch } from '../helpers/scratch.js';
import { vid } from '../helpers/ids.js';

/**
 * The catalog keeps its sorted listing of volumes/ while the directory is unchanged
 * (shared/store/catalog.ts listVolumeIds), so ListVolumes at 10,000 volumes need not readdir and sort
 * them for every page. Whatever it kept, a listing after a create or a delete must show it. How long
 * the directory must be still first is the filesystem's (shared/store/filesystem.ts); the waits below
 * are that rule's own windows of time passing, not something the kernel does: plain waits.
 */
let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

const MiB = 2 ** 20;
const make = (on: Core, id: string) => createVolume(on, { id, backend: 'dir', capacityBytes: MiB, createdBy: 'csi' });

it('a listing after a create or a delete shows it, before and after the directory settles', async () => {
  // The scratch is on this machine's root filesystem: ext4, local, with nanosecond times.
  expect(await isLocalFilesystem(s.root)).toBe(true);
  for (const id of ['v-b', 'v-a', 'v-c']) await make(core, id);
  expect(await core.catalog.listVolumeIds()).toEqual(['v-a', 'v-b', 'v-c']);
  await sleep(FINE_SETTLED_MS + 50);
  expect(await core.catalog.listVolumeIds()).toEqual(['v-a', 'v-b', 'v-c']);
  const kept = await core.catalog.listVolumeIds();
  expect(await core.catalog.listVolumeIds()).toBe(kept);
  await make(core, 'v-d');
  expect(await core.catalog.listVolumeIds()).toEqual(['v-a', 'v-b', 'v-c', 'v-d']);
  await deleteVolume(core, vid('v-b'));
  expect(await core.catalog.listVolumeIds()).toEqual(['v-a', 'v-c', 'v-d']);
  // A delete and a create in a row, as fast as they go: the count is the same, the names are not.
  await deleteVolume(core, vid('v-a'));
  await make(core, 'v-e');
  expect(await core.catalog.listVolumeIds()).toEqual(['v-c', 'v-d', 'v-e']);
  // Kept again once still, and a delete and a create in a row after that show too, round after round.
  const names = ['v-c', 'v-d', 'v-e'];
  for (let round = 0; round < 5; round++) {
    await sleep(FINE_SETTLED_MS + 50);
    await core.catalog.listVolumeIds();
    expect(await core.catalog.listVolumeIds()).toBe(await core.catalog.listVolumeIds());
    await deleteVolume(core, vid(names.shift() ?? ''));
    names.push(`v-n${round}`);
    await make(core, `v-n${round}`);
    expect(await core.catalog.listVolumeIds()).toEqual(names);
  }
});

it('on a filesystem that keeps whole seconds, a listing waits the long window before it is kept', async () => {
  // ext4 made with 128-byte inodes stamps whole seconds: every change within a second looks alike.
  const image = join(s.root, 'coarse.img');
  const root = join(s.root, 'coarse');
  mkdirSync(root);
  execFileSync('truncate', ['-s', '16M', image]);
  execFileSync('mkfs.ext4', ['-q', '-F', '-I', '128', image], { stdio: 'ignore' });
  execFileSync('mount', ['-o', 'loop', image, root]);
  const coarse = openCore(loadConfig({ TWINVOL_CONFIG: s.env.TWINVOL_CONFIG }, { dataRoot: root, stateDir: s.stateDir, kubeletDir: s.kubeletDir, nodeName: 'node-a' }));
  await make(coarse, 'w-a');
  const madeAt = Date.now();
  await sleep(FINE_SETTLED_MS + 50);
  const first = await coarse.catalog.listVolumeIds();
  const second = await coarse.catalog.listVolumeIds();
  expect(second).toEqual(['w-a']);
  // Read anew while within the long window (the test's own wait is far shorter than it).
  expect(Date.now() - madeAt).toBeLessThan(COARSE_SETTLED_MS);
  expect(second).not.toBe(first);
  await sleep(COARSE_SETTLED_MS + 1_000 - (Date.now() - madeAt));
  const kept = await coarse.catalog.listVolumeIds();
  expect(await coarse.catalog.listVolumeIds()).toBe(kept);
  await deleteVolume(coarse, vid('w-a'));
  await make(coarse, 'w-b');
  expect(await coarse.catalog.listVolumeIds()).toEqual(['w-b']);
});
