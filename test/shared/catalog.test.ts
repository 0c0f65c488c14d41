import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { VolumeRecord } from '../../shared/model.js';
import { Catalog } from '../../shared/store/catalog.js';
import { SCHEMA_VERSION, storeCounts } from '../../shared/store/json-record.js';
import { expectRejects, expectThrows } from './expect-error.js';
import { nid, sid, unchecked, vid } from '../helpers/ids.js';
import type { VolumeId } from '../../shared/validate.js';

let root: string;
let catalog: Catalog;
beforeEach(() => {
  root = mkdtempSync('/tmp/twinvol-test-catalog-');
  catalog = new Catalog(root);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const volume = (id: string, extra: Partial<VolumeRecord> = {}): VolumeRecord => ({
  schema: SCHEMA_VERSION,
  id: unchecked<VolumeId>(id),
  backend: 'dir',
  capacityBytes: 1024,
  fsType: '',
  access: 'single-node',
  parameters: {},
  attachments: [],
  createdBy: 'cli',
  createdAt: '2026-01-01T00:00:00.000Z',
  ...extra,
});

const workLeftovers = () => (existsSync(join(root, '.work')) ? readdirSync(join(root, '.work')) : []);

describe('Catalog paths', () => {
  it('places entries under the root and validates ids before they become paths', () => {
    expect(catalog.volumeDir('v1')).toBe(join(root, 'volumes', 'v1'));
    expect(catalog.imagePath('v1')).toBe(join(root, 'volumes', 'v1', 'image.img'));
    expect(catalog.dataDir('v1')).toBe(join(root, 'volumes', 'v1', 'data'));
    expect(catalog.snapshotDir('s1')).toBe(join(root, 'snapshots', 's1'));
    expect(catalog.pvPath('pv-1')).toBe(join(root, 'pvs', 'pv-1.json'));
    expectThrows(() => catalog.volumeDir('../etc'), 'InvalidArgument', 'volume id');
    expectThrows(() => catalog.snapshotDir('a/b'), 'InvalidArgument', 'snapshot id');
    expectThrows(() => catalog.pvPath('..'), 'InvalidArgument', 'PV name');
  });
});

describe('createEntry', () => {
  it('renames a populated work directory into place with its record', async () => {
    await catalog.createEntry('volumes', volume('v1'), async (work) => {
      expect(work.startsWith(join(root, '.work', 'new@volumes@v1@'))).toBe(true);
      // Nothing is visible under volumes/ while the entry is being built.
      expect(existsSync(catalog.volumeDir('v1'))).toBe(false);
      writeFileSync(join(work, 'payload'), 'hello');
    });
    expect(readdirSync(catalog.volumeDir('v1')).sort()).toEqual(['payload', 'volume.json']);
    expect(await catalog.getVolume('v1')).toEqual(volume('v1'));
    expect(workLeftovers()).toEqual([]);
  });

  it('leaves no volumes/<id> and nothing under .work when populate throws', async () => {
    await expect(
      catalog.createEntry('volumes', volume('v1'), async (work) => {
        writeFileSync(join(work, 'half-written'), 'x'.repeat(1000));
        mkdirSync(join(work, 'sub'));
        throw new Error('disk full');
      }),
    ).rejects.toThrow('disk full');
    expect(existsSync(catalog.volumeDir('v1'))).toBe(false);
    expect(await catalog.getVolume('v1')).toBeUndefined();
    expect(await catalog.listVolumeIds()).toEqual([]);
    expect(workLeftovers()).toEqual([]);
  });

  it('lets one of two concurrent creators of one id win; the other gets AlreadyExists', async () => {
    const populateAs = (who: string) => async (work: string) => {
      await sleep(20);
      writeFileSync(join(work, 'who'), who);
    };
    const results = await Promise.allSettled([
      catalog.createEntry('volumes', volume('v1', { parameters: { who: 'first' } }), populateAs('first')),
      catalog.createEntry('volumes', volume('v1', { parameters: { who: 'second' } }), populateAs('second')),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(lost[0]!.reason).toMatchObject({ name: 'TwinvolError', code: 'AlreadyExists', message: 'volume v1 already exists' });
    // The winner's record and data belong together.
    const winner = readFileSync(join(catalog.volumeDir('v1'), 'who'), 'utf8');
    expect((await catalog.getVolume('v1'))?.parameters.who).toBe(winner);
    expect(workLeftovers()).toEqual([]);
  });

  it('refuses to create over an existing entry', async () => {
    await catalog.createEntry('volumes', volume('v1'), async () => {});
    await expectRejects(catalog.createEntry('volumes', volume('v1'), async () => {}), 'AlreadyExists', 'volume v1 already exists');
    await catalog.createEntry('snapshots', { schema: 1, id: sid('s1'), sourceVolumeId: vid('v1'), backend: 'dir', fsType: '', sizeBytes: 1, createdAt: 'x' }, async () => {});
    await expectRejects(
      catalog.createEntry('snapshots', { schema: 1, id: sid('s1'), sourceVolumeId: vid('v1'), backend: 'dir', fsType: '', sizeBytes: 1, createdAt: 'x' }, async () => {}),
      'AlreadyExists',
      'snapshot s1 already exists',
    );
    expect((await catalog.getSnapshot('s1'))?.sourceVolumeId).toBe('v1');
    expect(workLeftovers()).toEqual([]);
  });

  it('refuses an invalid id before touching the disk', async () => {
    let populated = false;
    await expectRejects(
      catalog.createEntry('volumes', volume('../escape'), async () => {
        populated = true;
      }),
      'InvalidArgument',
    );
    expect(populated).toBe(false);
    expect(readdirSync(root)).toEqual([]);
  });
});

describe('removeEntry', () => {
  it('removes an entry with its data and leaves nothing under .work', async () => {
    await catalog.createEntry('volumes', volume('v1'), async (work) => writeFileSync(join(work, 'data'), 'x'));
    await catalog.removeEntry('volumes', 'v1');
    expect(existsSync(catalog.volumeDir('v1'))).toBe(false);
    expect(await catalog.listVolumeIds()).toEqual([]);
    expect(workLeftovers()).toEqual([]);
  });

  it('is fine with an unknown id, and refuses an invalid one', async () => {
    await catalog.removeEntry('volumes', 'never-made');
    await catalog.removeEntry('snapshots', 'never-made');
    await expectRejects(async () => catalog.removeEntry('volumes', '../../etc'), 'InvalidArgument');
  });
});

describe('listVolumeIds / requireVolume', () => {
  it('answers [] before anything exists, then sorted ids without dot-entries', async () => {
    expect(await catalog.listVolumeIds()).toEqual([]);
    for (const id of ['vol-b', 'vol-a', 'A1']) await catalog.createEntry('volumes', volume(id), async () => {});
    mkdirSync(join(root, 'volumes', '.tmp-something'));
    writeFileSync(join(root, 'volumes', '.DS_Store'), '');
    expect(await catalog.listVolumeIds()).toEqual(['A1', 'vol-a', 'vol-b']);
    expect(await catalog.listSnapshotIds()).toEqual([]);
  });

  it('requireVolume answers NotFound for an unknown id', async () => {
    await expectRejects(catalog.requireVolume('ghost'), 'NotFound', 'volume ghost does not exist');
  });

  it('refuses a hand-edited volume record, naming the file and the field, and trusts nothing of it', async () => {
    await catalog.createEntry('volumes', volume('v1'), async () => {});
    const path = join(catalog.volumeDir('v1'), 'volume.json');
    const edited = { ...volume('v1'), backend: 'nfs', attachments: [{ node: 3, readonly: false, at: 'x', via: 'cli' }] };
    writeFileSync(path, JSON.stringify(edited));
    await expectRejects(
      catalog.getVolume('v1'),
      'Internal',
      `state record ${path} does not parse: backend: expected one of dir, block, static, exec; attachments.0.node: not a valid node name`,
    );
  });

  it('updateVolume rewrites the record under its lock', async () => {
    await catalog.createEntry('volumes', volume('v1'), async () => {});
    await Promise.all(
      ['n1', 'n2', 'n3', 'n4'].map((node) =>
        catalog.updateVolume('v1', (v) => ({ ...v, attachments: [...v.attachments, { node: nid(node), readonly: false, at: 'x', via: 'cli' }] })),
      ),
    );
    expect((await catalog.requireVolume('v1')).attachments.map((a) => a.node).sort()).toEqual(['n1', 'n2', 'n3', 'n4']);
  });
});

describe('PV records', () => {
  it('round-trips pvName -> volumeId, overwrites, and forgets', async () => {
    expect(await catalog.pvVolume('pv-1')).toBeUndefined();
    await catalog.recordPv('pv-1', vid('vol-1'));
    expect(await catalog.pvVolume('pv-1')).toBe('vol-1');
    expect(JSON.parse(readFileSync(catalog.pvPath('pv-1'), 'utf8'))).toEqual({ schema: SCHEMA_VERSION, pvName: 'pv-1', volumeId: 'vol-1' });
    await catalog.recordPv('pv-1', vid('vol-1'));
    await catalog.recordPv('pv-1', vid('vol-2'));
    expect(await catalog.pvVolume('pv-1')).toBe('vol-2');
    await catalog.forgetPv('pv-1');
    await catalog.forgetPv('pv-1');
    expect(await catalog.pvVolume('pv-1')).toBeUndefined();
  });

  it('keeps every valid PV name, up to 253 characters, and two long names that share a prefix apart', async () => {
    const long = (tail: string) => `${'p'.repeat(200)}.${tail.padStart(52, 'x')}`;
    expect(long('a')).toHaveLength(253);
    await catalog.recordPv(long('a'), vid('vol-a'));
    await catalog.recordPv(long('b'), vid('vol-b'));
    expect(await catalog.pvVolume(long('a'))).toBe('vol-a');
    expect(await catalog.pvVolume(long('b'))).toBe('vol-b');
    expect(readdirSync(join(root, 'pvs')).every((f) => Buffer.byteLength(f) <= 255)).toBe(true);
    await catalog.forgetPv(long('a'));
    expect(await catalog.pvVolume(long('a'))).toBeUndefined();
    expect(await catalog.pvVolume(long('b'))).toBe('vol-b');
  });

  it('refuses PV names that would escape pvs/', async () => {
    await expectRejects(async () => catalog.recordPv('../x', vid('v')), 'InvalidArgument', 'PV name');
    expect(existsSync(join(root, 'x.json'))).toBe(false);
  });
});

describe('abandoned work', () => {
  /** What a process killed inside a create or delete leaves: its work directory, with a partial copy. */
  const leftover = (name: string) => {
    mkdirSync(join(root, '.work', name, 'data'), { recursive: true });
    writeFileSync(join(root, '.work', name, 'data', 'partial'), 'x'.repeat(4096));
  };

  it('a create sweeps the leftovers of its own entry and every other whose lock is free, never a busy one or a foreign name', async () => {
    leftover('new@volumes@v1@0badc0de');
    leftover('trash@volumes@v1@00000001');
    leftover('new@snapshots@s1@00000002');
    leftover('new@volumes@busy@00000003');
    leftover('not-ours');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = catalog.lock('volume', 'busy', async () => {
      locked();
      await held;
    });
    await isLocked;
    await catalog.createEntry('volumes', volume('v1'), async () => {});
    expect(workLeftovers().sort()).toEqual(['new@volumes@busy@00000003', 'not-ours']);
    // Held by this process: busy, and judged so without a try at the lock (shared/store/lock.ts).
    const tries = storeCounts.lockTries;
    expect(await catalog.sweepAbandoned()).toMatchObject({ removed: [], busy: [{ name: 'new@volumes@busy@00000003' }], foreign: ['not-ours'] });
    expect(storeCounts.lockTries - tries).toBe(0);
    release();
    await holder;
    expect(await catalog.sweepAbandoned()).toMatchObject({ removed: [{ name: 'new@volumes@busy@00000003', entity: 'volumes', id: 'busy' }], busy: [], foreign: ['not-ours'] });
    expect(workLeftovers()).toEqual(['not-ours']);
  });

  it('a delete sweeps what an earlier killed delete of the same entry left', async () => {
    await catalog.createEntry('snapshots', { schema: 1, id: sid('s1'), sourceVolumeId: vid('v1'), backend: 'dir', fsType: '', sizeBytes: 1, createdAt: 'x' }, async () => {});
    leftover('trash@snapshots@s1@0000beef');
    await catalog.removeEntry('snapshots', 's1');
    expect(workLeftovers()).toEqual([]);
  });
});

