import { rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Core } from '../../shared/core/core.js';
import { createVolume } from '../../shared/core/volumes.js';
import { volumeCondition } from '../../shared/core/backend-traits.js';
import { Catalog } from '../../shared/store/catalog.js';
import { storeCounts } from '../../shared/store/json-record.js';
import { expectRejects } from './expect-error.js';
import { coreIn, useScratchCore } from './core-scratch.js';
import type { Scratch } from '../helpers/scratch.js';
import { expectSuccess, flexOptions, runCli, runFlex } from '../helpers/flex-runner.js';

/**
 * Catalog.listedVolume keeps the records ListVolumes read, checked by one stat per record. What these
 * prove: a kept record is really not read again, and whatever another process (the FlexVolume
 * executable, the admin CLI) or another Core does to the catalog shows in the very next listing.
 * A record is only kept once its file is 2 s old, so the tests wait that long before relying on it.
 */
let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

const SETTLE_MS = 2_100;
const dir = (id: string) => ({ id, backend: 'dir' as const, capacityBytes: 1 << 20, createdBy: 'cli' as const });
const readsDuring = async <T>(fn: () => Promise<T>): Promise<{ value: T; reads: number }> => {
  const before = storeCounts.reads;
  const value = await fn();
  return { value, reads: storeCounts.reads - before };
};

describe('Catalog.listedVolume', () => {
  it('reads a settled record once, then answers from one stat, with a frozen record', async () => {
    await createVolume(core, dir('lc-a'));
    // Fresh: read every time, since a file made within a timestamp tick could later be mistaken for it.
    expect((await readsDuring(() => core.catalog.listedVolume('lc-a'))).reads).toBe(1);
    expect((await readsDuring(() => core.catalog.listedVolume('lc-a'))).reads).toBe(1);
    await sleep(SETTLE_MS);
    const first = await readsDuring(() => core.catalog.listedVolume('lc-a'));
    const again = await readsDuring(() => core.catalog.listedVolume('lc-a'));
    expect(first.reads).toBe(1);
    expect(again.reads).toBe(0);
    expect(again.value).toBe(first.value);
    expect(again.value).toEqual(await core.catalog.getVolume('lc-a'));
    // Shared by every listing that finds it unchanged, so nobody may change it.
    expect(Object.isFrozen(again.value)).toBe(true);
    expect(Object.isFrozen(again.value?.attachments)).toBe(true);
    expect(() => (again.value as { capacityBytes: number }).capacityBytes++).toThrow(TypeError);
  });

  it('sees at once what the FlexVolume executable and the admin CLI (other processes) change', async () => {
    for (const id of ['lc-a', 'lc-b']) {
      const r = await runCli(s.env, ['create', id, '--backend', 'dir', '--size', '1Mi']);
      expect(r.exitCode, r.stderr).toBe(0);
    }
    await sleep(SETTLE_MS);
    const listing = async () => {
      const out = new Map<string, string[]>();
      for (const id of await core.catalog.listVolumeIds()) {
        const v = await core.catalog.listedVolume(id);
        if (v) out.set(id, v.attachments.map((a) => a.node));
      }
      return out;
    };
    await listing();
    expect((await readsDuring(listing)).reads).toBe(0);

    // attach: the FlexVolume executable rewrites lc-a's record.
    expectSuccess(await runFlex(s.env, ['attach', flexOptions('pv-a', { volumeId: 'lc-a' }), 'node-x']));
    expect(await listing()).toEqual(new Map([['lc-a', ['node-x']], ['lc-b', []]]));
    expectSuccess(await runFlex(s.env, ['detach', 'pv-a', 'node-x']));
    expect(await listing()).toEqual(new Map([['lc-a', []], ['lc-b', []]]));

    // delete and create by the admin CLI.
    expect((await runCli(s.env, ['delete', 'lc-b'])).exitCode).toBe(0);
    expect(await core.catalog.listedVolume('lc-b')).toBeUndefined();
    expect((await runCli(s.env, ['create', 'lc-c', '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    expect(await listing()).toEqual(new Map([['lc-a', []], ['lc-c', []]]));
  });

  it('sees a kept record replaced by another of the same size at once, however fast, whatever its inode', async () => {
    await createVolume(core, { ...dir('lc-a'), parameters: { p: 'v00' } });
    await sleep(SETTLE_MS);
    const path = join(core.catalog.volumeDir('lc-a'), 'volume.json');
    expect((await core.catalog.listedVolume('lc-a'))?.parameters).toEqual({ p: 'v00' });
    const size = statSync(path).size;
    // A second Core, as a second process would be: its writes replace the file by rename, freeing
    // inode numbers that the next write may be given again, within one timestamp tick.
    const other = coreIn(s);
    for (let i = 1; i < 40; i++) {
      const value = `v${String(i).padStart(2, '0')}`;
      await other.catalog.updateVolume('lc-a', (v) => ({ ...v, parameters: { p: value } }));
      expect(statSync(path).size).toBe(size);
      expect((await core.catalog.listedVolume('lc-a'))?.parameters).toEqual({ p: value });
    }
  });

  it('refuses a kept record damaged by hand afterwards, as a first read would', async () => {
    await createVolume(core, dir('lc-a'));
    await sleep(SETTLE_MS);
    await core.catalog.listedVolume('lc-a');
    const path = join(core.catalog.volumeDir('lc-a'), 'volume.json');
    writeFileSync(path, '{"schema": 5, "id": "lc-a"}\n');
    await expectRejects(core.catalog.listedVolume('lc-a'), 'Internal', 'does not parse');
  });

  it('listedVolumes answers a batch in order: kept, read anew, and gone alike', async () => {
    for (const id of ['lc-a', 'lc-b', 'lc-c']) await createVolume(core, dir(id));
    await sleep(SETTLE_MS);
    await core.catalog.listedVolumes(['lc-a', 'lc-c']);
    await core.catalog.updateVolume('lc-c', (v) => ({ ...v, capacityBytes: 3 << 20 }));
    await createVolume(core, dir('lc-d'));
    const { value, reads } = await readsDuring(() => core.catalog.listedVolumes(['lc-a', 'lc-b', 'lc-gone', 'lc-c', 'lc-d']));
    expect(value.map((v) => v && [v.id, v.capacityBytes])).toEqual([['lc-a', 1 << 20], ['lc-b', 1 << 20], undefined, ['lc-c', 3 << 20], ['lc-d', 1 << 20]]);
    // lc-a was kept; lc-b, lc-gone (not there), lc-c (changed) and lc-d (new) are read.
    expect(reads).toBe(4);
  });

  it('a second Catalog on the same root keeps its own records and sees the first one\'s writes', async () => {
    await createVolume(core, dir('lc-a'));
    await sleep(SETTLE_MS);
    const other = new Catalog(s.dataRoot);
    expect((await other.listedVolume('lc-a'))?.capacityBytes).toBe(1 << 20);
    await core.catalog.updateVolume('lc-a', (v) => ({ ...v, capacityBytes: 2 << 20 }));
    expect((await other.listedVolume('lc-a'))?.capacityBytes).toBe(2 << 20);
  });

  it('the dir backend reports a volume whose data directory went away, or became a file, at once', async () => {
    const { volume } = await createVolume(core, dir('lc-a'));
    expect((await volumeCondition(core, volume)).abnormal).toBe(false);
    rmSync(core.catalog.dataDir('lc-a'), { recursive: true });
    expect(await volumeCondition(core, volume)).toEqual({ abnormal: true, message: 'the backing directory of volume lc-a is missing' });
    writeFileSync(core.catalog.dataDir('lc-a'), '');
    expect((await volumeCondition(core, volume)).abnormal).toBe(true);
  });

  it('the block backend reports an image that went away or shrank, at once', async () => {
    const { volume } = await createVolume(core, { ...dir('lc-b'), backend: 'block', capacityBytes: 16 << 20 });
    expect(await volumeCondition(core, volume)).toEqual({ abnormal: false, message: 'volume is healthy' });
    truncateSync(core.catalog.imagePath('lc-b'), 8 << 20);
    expect((await volumeCondition(core, volume)).message).toBe(`the image of volume lc-b is smaller (${8 << 20} bytes) than its capacity`);
    rmSync(core.catalog.imagePath('lc-b'));
    expect(await volumeCondition(core, volume)).toEqual({ abnormal: true, message: 'the backing image of volume lc-b is missing' });
  });
});
