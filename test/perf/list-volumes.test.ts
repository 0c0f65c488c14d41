import { expect, it } from 'vitest';
import type { Core } from '../../shared/core/core.js';
import { createVolume, deleteVolume } from '../../shared/core/volumes.js';
import { useScratchCore } from '../shared/core-scratch.js';
import { vid } from '../helpers/ids.js';

/**
 * The catalog keeps its sorted listing of volumes/ while the directory is unchanged
 * (shared/store/catalog.ts listVolumeIds), so ListVolumes at 10,000 volumes need not readdir and sort
 * them for every page. Whatever it kept, a listing after a create or a delete must show it.
 */
let core: Core;
useScratchCore((_s, c) => {
  core = c;
});

const MiB = 2 ** 20;
const make = (id: string) => createVolume(core, { id, backend: 'dir', capacityBytes: MiB, createdBy: 'csi' });

it('a listing after a create or a delete shows it, before and after the directory settles', async () => {
  for (const id of ['v-b', 'v-a', 'v-c']) await make(id);
  expect(await core.catalog.listVolumeIds()).toEqual(['v-a', 'v-b', 'v-c']);
  // Past LISTING_SETTLED_MS: from here the listing is kept, and must still follow every change. This
  // is the rule's own window of time passing, not something the kernel does: a plain wait.
  await new Promise((r) => setTimeout(r, 2_100));
  expect(await core.catalog.listVolumeIds()).toEqual(['v-a', 'v-b', 'v-c']);
  const kept = await core.catalog.listVolumeIds();
  expect(await core.catalog.listVolumeIds()).toBe(kept);
  await make('v-d');
  expect(await core.catalog.listVolumeIds()).toEqual(['v-a', 'v-b', 'v-c', 'v-d']);
  await deleteVolume(core, vid('v-b'));
  expect(await core.catalog.listVolumeIds()).toEqual(['v-a', 'v-c', 'v-d']);
  // A delete and a create in a row, as fast as they go: the count is the same, the names are not.
  await deleteVolume(core, vid('v-a'));
  await make('v-e');
  expect(await core.catalog.listVolumeIds()).toEqual(['v-c', 'v-d', 'v-e']);
});
