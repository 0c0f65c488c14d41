import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Core } from '../../shared/core/core.js';
import { createGroupSnapshot, deleteGroupSnapshot, getGroupSnapshot, MAX_GROUP_VOLUMES } from '../../shared/core/group-snapshots.js';
import { createSnapshot, deleteSnapshot, listSnapshots } from '../../shared/core/snapshots.js';
import { createVolume } from '../../shared/core/volumes.js';
import { snapshotIdForName } from '../../shared/names.js';
import { SCHEMA_VERSION } from '../../shared/store/json-record.js';
import { validateGroupSnapshotId } from '../../shared/validate.js';
import { vid } from '../helpers/ids.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';
import { coreIn } from './core-scratch.js';
import { expectRejects } from './expect-error.js';

// The core's rules for group snapshots without a server; freezing is proved end to end in
// test/csi/group-snapshots.test.ts and test/csi/crash.test.ts.
let s: Scratch;
let core: Core;
beforeEach(async () => {
  s = createScratch('node-a');
  core = coreIn(s);
  for (const id of ['a', 'b']) await createVolume(core, { id, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
});
afterEach(() => s.cleanup());

const gid = validateGroupSnapshotId('g');
const FILES = 20_000;

/** Waits for a group's member copy to show in .work/, sweeps as every create does first, and checks the copy is whole. */
async function cutAndSweep(making: ReturnType<typeof createGroupSnapshot>): Promise<void> {
  const work = join(s.dataRoot, '.work');
  let cutting = false;
  const deadline = Date.now() + 20_000;
  while (!cutting && Date.now() < deadline) {
    cutting = existsSync(work) && readdirSync(work).some((e) => e.includes('snapshots'));
    if (!cutting) await new Promise((r) => setTimeout(r, 2));
  }
  expect(cutting, "the member's copy was seen in .work/ while it was made").toBe(true);
  // What every create does first (shared/store/catalog.ts createEntry), and a server at its start.
  const swept = await core.catalog.sweepAbandoned();
  const made = await making;
  expect(swept.removed).toEqual([]);
  const copy = join(core.catalog.snapshotDir(made.group.members[0] ?? ''), 'data');
  expect(readdirSync(copy).reduce((n, d) => n + readdirSync(join(copy, d)).length, 0)).toBe(FILES);
}

describe('createGroupSnapshot', () => {
  it('refuses a static volume, a repeated or missing source, and too many volumes, making nothing', async () => {
    await createVolume(core, { id: 't', backend: 'static', capacityBytes: 0, source: 'tmpfs', fsType: 'tmpfs', createdBy: 'cli' });
    await expectRejects(createGroupSnapshot(core, 'g', [vid('a'), vid('t')]), 'InvalidArgument', 'volume t is static');
    await expectRejects(createGroupSnapshot(core, 'g', [vid('a'), vid('a')]), 'InvalidArgument', 'source volume a is named twice');
    await expectRejects(createGroupSnapshot(core, 'g', [vid('a'), vid('ghost')]), 'NotFound', 'ghost');
    await expectRejects(createGroupSnapshot(core, 'g', []), 'InvalidArgument', 'at least one source volume');
    const many = Array.from({ length: MAX_GROUP_VOLUMES + 1 }, (_, i) => vid(`v${i}`));
    await expectRejects(createGroupSnapshot(core, 'g', many), 'InvalidArgument', `at most ${MAX_GROUP_VOLUMES} volumes`);
    expect(await listSnapshots(core)).toEqual([]);
    expect(await core.catalog.getGroup(gid)).toBeUndefined();
  });

  it('redoes every member of an attempt a crash cut short, so no group mixes two moments', async () => {
    // What a killed attempt leaves: the first member cut, no group record.
    const stale = snapshotIdForName('g/a');
    await core.catalog.createEntry('snapshots', { schema: SCHEMA_VERSION, id: stale, name: 'g/a', sourceVolumeId: vid('a'), groupId: gid, backend: 'dir', fsType: '', sizeBytes: 1, createdAt: '2026-01-01T00:00:00.000Z' }, (dir) => mkdir(`${dir}/data`).then(() => undefined));
    // Not the group's yet: anyone may delete it, and the retry replaces it.
    const made = await createGroupSnapshot(core, 'g', [vid('a'), vid('b')]);
    expect(made.snapshots.map((m) => m.createdAt)).toEqual([made.group.createdAt, made.group.createdAt]);
    expect(made.snapshots[0]?.id).toBe(stale);
    expect((await listSnapshots(core)).map((m) => m.groupId)).toEqual(['g', 'g']);
  });

  it('keeps a plain snapshot of the same volume apart from the group, and a member with its group', async () => {
    await createSnapshot(core, 'plain', vid('a'));
    const made = await createGroupSnapshot(core, 'g', [vid('b'), vid('a')]);
    expect(made.group.sourceVolumeIds).toEqual(['b', 'a']);
    const member = made.group.members[0];
    if (!member) throw new Error('no member');
    await expectRejects(deleteSnapshot(core, member), 'FailedPrecondition', 'belongs to group snapshot g');
    await expectRejects(getGroupSnapshot(core, gid, [member]), 'FailedPrecondition', 'are not those of group snapshot g');
    await deleteGroupSnapshot(core, gid);
    expect((await listSnapshots(core)).map((m) => m.id)).toEqual(['plain']);
  });

  it("holds each member's snapshot lock while it is cut: another create's sweep leaves its copy alone", async () => {
    // Before, the members were cut without their locks: any create meanwhile found them free and
    // removed a member's copy as it was being made, and the group answered ready with files missing.
    const data = join(core.catalog.volumeDir('a'), 'data');
    for (let d = 0; d < 20; d++) {
      mkdirSync(join(data, `d${d}`));
      for (let f = 0; f < FILES / 20; f++) writeFileSync(join(data, `d${d}`, `f${f}`), '');
    }
    const making = createGroupSnapshot(core, 'g', [vid('a')]);
    // Settled before afterEach removes the scratch, even when an expectation fails mid-copy.
    try {
      await cutAndSweep(making);
    } finally {
      await making.catch(() => undefined);
    }
  }, 60_000);

  it('takes a long group name with a long volume id, each within 128 bytes', async () => {
    const long = vid('v'.repeat(100));
    await createVolume(core, { id: long, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
    const made = await createGroupSnapshot(core, 'g'.repeat(100), [long]);
    expect(made.snapshots[0]?.id).toMatch(/^group-member-[0-9a-f]{64}$/);
    expect((await createGroupSnapshot(core, 'g'.repeat(100), [long])).group.members).toEqual(made.group.members);
  });
});

describe('deleteGroupSnapshot', () => {
  it('removes the members an attempt cut short left, though the group never got its record', async () => {
    const stale = snapshotIdForName('g/a');
    await core.catalog.createEntry('snapshots', { schema: SCHEMA_VERSION, id: stale, name: 'g/a', sourceVolumeId: vid('a'), groupId: gid, backend: 'dir', fsType: '', sizeBytes: 1, createdAt: '2026-01-01T00:00:00.000Z' }, (dir) => mkdir(`${dir}/data`).then(() => undefined));
    await createSnapshot(core, 'plain', vid('b'));
    await deleteGroupSnapshot(core, gid);
    expect((await listSnapshots(core)).map((m) => m.id)).toEqual(['plain']);
  });
});
