import { execFileSync } from 'node:child_process';
import { readFileSync, statSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCore } from '../../shared/core/core.js';
import { loadConfig } from '../../shared/config.js';
import { expectCode, outcome } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { repeatedOk } from './helpers/repeat.js';
import { blockCap, GiB, MiB, mountCap, size } from './helpers/requests.js';
import { treeOf } from './helpers/tree.js';

const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl } = csi;

function record(id: string): { parameters: Record<string, string>; capacityBytes: number; fsType: string; access: string; attachments: { node: string }[] } {
  return JSON.parse(readFileSync(join(csi.s.dataRoot, 'volumes', id, 'volume.json'), 'utf8'));
}

const dirVolume = (name: string, extra: Record<string, unknown> = {}) =>
  ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(64 * MiB), ...extra });

describe('CreateVolume', () => {
  it('requires a name and capabilities with an access mode and an access type', async () => {
    await expectCode(ctl('CreateVolume', { volume_capabilities: [mountCap()] }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateVolume', { name: 'req-1' }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateVolume', { name: 'req-1', volume_capabilities: [{ mount: {} }] }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateVolume', { name: 'req-1', volume_capabilities: [{ access_mode: { mode: 'SINGLE_NODE_WRITER' } }] }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateVolume', { name: 'req-1', volume_capabilities: [{ mount: {}, access_mode: { mode: 'UNKNOWN' } }] }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerGetVolume', { volume_id: 'req-1' }), 'NOT_FOUND');
  });

  it.each([['nul\0byte'], ['x'.repeat(129)], ['tab\there']])(
    'refuses the name %j with INVALID_ARGUMENT and writes nothing',
    async (name) => {
      const before = treeOf(csi.s.root);
      const message = await expectCode(ctl('CreateVolume', { name, volume_capabilities: [mountCap()] }), 'INVALID_ARGUMENT');
      expect(message).toMatch(/^name /);
      expect(treeOf(csi.s.root)).toEqual(before);
    },
  );

  it.each([['..'], ['a/b'], ['../escape'], ['a..b'], ['/abs'], ['.hidden'], ['sp ace']])(
    'gives the name %j a derived id that is one plain entry under volumes/',
    async (name) => {
      const { volume } = await dirVolume(name);
      expect(volume.volume_id).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*__[0-9a-f]{32}$/);
      expect(volume.volume_id).not.toContain('..');
      expect(statSync(join(csi.s.dataRoot, 'volumes', volume.volume_id, 'data')).isDirectory()).toBe(true);
      await ctl('DeleteVolume', { volume_id: volume.volume_id });
    },
  );

  it('accepts a name of exactly 128 bytes and uses it as the volume id', async () => {
    const name = `n${'x'.repeat(127)}`;
    const r = await dirVolume(name);
    expect(r.volume.volume_id).toBe(name);
    expect(statSync(join(csi.s.dataRoot, 'volumes', name, 'data')).isDirectory()).toBe(true);
  });

  it('makes a sparse 10 GiB ext4 block volume when nothing is specified', async () => {
    const r = await ctl('CreateVolume', { name: 'default-size', volume_capabilities: [mountCap()] });
    expect(r.volume).toEqual({
      volume_id: 'default-size',
      capacity_bytes: String(10 * GiB),
      volume_context: { backend: 'block', fsType: 'ext4' },
      content_source: null,
      accessible_topology: [],
    });
    const image = statSync(join(csi.s.dataRoot, 'volumes/default-size/image.img'));
    expect(image.size).toBe(10 * GiB);
    // ext4 is made at create (shared/backends/block.ts): 4.3 MiB of metadata, the rest still sparse.
    expect(image.blocks * 512).toBeLessThan((10 * GiB) / 1000);
    expect(execFileSync('blkid', ['-p', '-s', 'TYPE', '-o', 'value', '--', join(csi.s.dataRoot, 'volumes/default-size/image.img')], { encoding: 'utf8' }).trim()).toBe('ext4');
  });

  it('answers the same volume to every repeat of the same request', async () => {
    const req = { name: 'idem', volume_capabilities: [mountCap('xfs')], capacity_range: size(400 * MiB), parameters: { backend: 'block' } };
    const r = await repeatedOk('CreateVolume', () => ctl('CreateVolume', req));
    expect(r.volume).toMatchObject({ volume_id: 'idem', capacity_bytes: String(400 * MiB), volume_context: { backend: 'block', fsType: 'xfs' } });
  });

  it('answers ALREADY_EXISTS when the same name comes with another size, type, access or parameters', async () => {
    const base = { name: 'conflict', volume_capabilities: [mountCap('ext4')], capacity_range: size(64 * MiB) };
    await ctl('CreateVolume', base);
    const variants = [
      { ...base, capacity_range: size(128 * MiB) },
      { ...base, volume_capabilities: [mountCap('xfs')] },
      { ...base, parameters: { backend: 'dir' } },
      { ...base, parameters: { fsType: 'ext4' } },
      { ...base, volume_capabilities: [blockCap('MULTI_NODE_READER_ONLY')] },
    ];
    for (const v of variants) expect(await expectCode(ctl('CreateVolume', v), 'ALREADY_EXISTS')).toContain('volume conflict already exists');
    expect(record('conflict').capacityBytes).toBe(64 * MiB);
  });

  it('strips the provisioner\'s csi.storage.k8s.io/ parameters before storing and comparing', async () => {
    const req = (pvc: string) => ({
      name: 'stripped',
      volume_capabilities: [mountCap()],
      capacity_range: size(64 * MiB),
      parameters: { backend: 'dir', 'csi.storage.k8s.io/pvc/name': pvc, 'csi.storage.k8s.io/pv/name': 'pv-1' },
    });
    const first = await ctl('CreateVolume', req('claim-a'));
    expect(await ctl('CreateVolume', req('claim-b'))).toEqual(first);
    expect(record('stripped').parameters).toEqual({ backend: 'dir' });
  });

  it('accepts 4 KiB of provisioner parameters', async () => {
    const parameters = { backend: 'dir', 'csi.storage.k8s.io/pvc/name': 'p'.repeat(2000), 'csi.storage.k8s.io/pvc/namespace': 'n'.repeat(2000) };
    const r = await ctl('CreateVolume', { name: 'big-map', volume_capabilities: [mountCap()], parameters, capacity_range: size(MiB) });
    expect(r.volume.volume_id).toBe('big-map');
  });

  it('refuses unknown parameters, backends and conflicting filesystem types', async () => {
    await expectCode(ctl('CreateVolume', { name: 'bad-p', volume_capabilities: [mountCap()], parameters: { fstype: 'ext4' } }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateVolume', { name: 'bad-p', volume_capabilities: [mountCap()], parameters: { backend: 'nfs' } }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateVolume', { name: 'bad-p', volume_capabilities: [mountCap('xfs')], parameters: { fsType: 'ext4' } }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateVolume', { name: 'bad-p', volume_capabilities: [mountCap('btrfs')] }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerGetVolume', { volume_id: 'bad-p' }), 'NOT_FOUND');
  });

  it('checks capacity ranges: inconsistent is INVALID_ARGUMENT, unsatisfiable is OUT_OF_RANGE', async () => {
    const req = (capacity_range: object) => ctl('CreateVolume', { name: 'range', volume_capabilities: [mountCap()], capacity_range });
    await expectCode(req({ required_bytes: String(2 * GiB), limit_bytes: String(GiB) }), 'INVALID_ARGUMENT');
    await expectCode(req({ required_bytes: '-5' }), 'INVALID_ARGUMENT');
    await expectCode(req({ required_bytes: String(2 ** 51) }), 'OUT_OF_RANGE');
    await expectCode(req({ required_bytes: String(MiB + 1), limit_bytes: String(MiB + 100) }), 'OUT_OF_RANGE');
    await expectCode(ctl('ControllerGetVolume', { volume_id: 'range' }), 'NOT_FOUND');
    // Block images come in whole MiB; a limit alone caps the 10 GiB default.
    expect((await ctl('CreateVolume', { name: 'range-up', volume_capabilities: [mountCap()], capacity_range: size(1) })).volume.capacity_bytes).toBe(String(MiB));
    const capped = await ctl('CreateVolume', { name: 'range-cap', volume_capabilities: [mountCap()], capacity_range: { limit_bytes: String(300 * MiB) } });
    expect(capped.volume.capacity_bytes).toBe(String(300 * MiB));
  });

  it('maps access modes: multi-node writers only on dir volumes, block filesystems single-node only', async () => {
    const multi = await ctl('CreateVolume', {
      name: 'shared-dir',
      volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')],
      parameters: { backend: 'dir' },
      capacity_range: size(MiB),
    });
    expect(multi.volume.volume_id).toBe('shared-dir');
    expect(record('shared-dir').access).toBe('multi-node');
    for (const cap of [mountCap('', 'MULTI_NODE_MULTI_WRITER'), mountCap('', 'MULTI_NODE_READER_ONLY'), blockCap('MULTI_NODE_MULTI_WRITER')])
      await expectCode(ctl('CreateVolume', { name: 'shared-block', volume_capabilities: [cap] }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateVolume', { name: 'dir-raw', volume_capabilities: [blockCap()], parameters: { backend: 'dir' } }), 'INVALID_ARGUMENT');
    const raw = await ctl('CreateVolume', { name: 'raw-multi', volume_capabilities: [blockCap('MULTI_NODE_READER_ONLY')], capacity_range: size(MiB) });
    expect(raw.volume.volume_id).toBe('raw-multi');
    expect(record('raw-multi').access).toBe('multi-node');
    expect(record('shared-dir').fsType).toBe('');
  });

  it('answers NOT_FOUND for a missing source snapshot or volume, and creates nothing', async () => {
    const before = treeOf(join(csi.s.dataRoot, 'volumes'));
    await expectCode(ctl('CreateVolume', { name: 'from-nothing', volume_capabilities: [mountCap()], volume_content_source: { snapshot: { snapshot_id: 'no-such-snap' } } }), 'NOT_FOUND');
    await expectCode(ctl('CreateVolume', { name: 'from-nothing', volume_capabilities: [mountCap()], volume_content_source: { volume: { volume_id: 'no-such-vol' } } }), 'NOT_FOUND');
    await expectCode(ctl('CreateVolume', { name: 'from-nothing', volume_capabilities: [mountCap()], volume_content_source: { volume: { volume_id: '../x' } } }), 'INVALID_ARGUMENT');
    expect(treeOf(join(csi.s.dataRoot, 'volumes'))).toEqual(before);
  });
});

describe('DeleteVolume', () => {
  it('requires a well-formed id and answers OK for unknown ones, every time', async () => {
    await expectCode(ctl('DeleteVolume', {}), 'INVALID_ARGUMENT');
    await expectCode(ctl('DeleteVolume', { volume_id: '../data' }), 'INVALID_ARGUMENT');
    await repeatedOk('DeleteVolume unknown', () => ctl('DeleteVolume', { volume_id: 'never-existed' }));
  });

  it('refuses while published to a node, then deletes the data', async () => {
    await dirVolume('del-me');
    await ctl('ControllerPublishVolume', { volume_id: 'del-me', node_id: 'node-a', volume_capability: mountCap() });
    expect(await expectCode(ctl('DeleteVolume', { volume_id: 'del-me' }), 'FAILED_PRECONDITION')).toContain('node node-a');
    await ctl('ControllerUnpublishVolume', { volume_id: 'del-me', node_id: 'node-a' });
    await repeatedOk('DeleteVolume', () => ctl('DeleteVolume', { volume_id: 'del-me' }));
    expect(treeOf(join(csi.s.dataRoot, 'volumes')).some((p) => p.startsWith('del-me'))).toBe(false);
  });
});

describe('ControllerPublishVolume / ControllerUnpublishVolume', () => {
  it('requires volume id, node id and capability; unknown volume is NOT_FOUND', async () => {
    await dirVolume('pub-req');
    await expectCode(ctl('ControllerPublishVolume', { node_id: 'node-a', volume_capability: mountCap() }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerPublishVolume', { volume_id: 'pub-req', volume_capability: mountCap() }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerPublishVolume', { volume_id: 'pub-req', node_id: 'node-a' }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerPublishVolume', { volume_id: 'pub-req', node_id: 'bad/node', volume_capability: mountCap() }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerPublishVolume', { volume_id: 'no-such', node_id: 'node-a', volume_capability: mountCap() }), 'NOT_FOUND');
    await expectCode(ctl('ControllerUnpublishVolume', { node_id: 'node-a' }), 'INVALID_ARGUMENT');
    expect(record('pub-req').attachments).toEqual([]);
  });

  it('publishes once per node, refuses a second node for single-node volumes, naming the holder', async () => {
    await ctl('CreateVolume', { name: 'single', volume_capabilities: [mountCap()], capacity_range: size(64 * MiB) });
    const req = { volume_id: 'single', node_id: 'node-a', volume_capability: mountCap() };
    await csi.registerNodes('node-b');
    expect(await repeatedOk('ControllerPublishVolume', () => ctl('ControllerPublishVolume', req))).toEqual({ publish_context: {} });
    const msg = await expectCode(ctl('ControllerPublishVolume', { ...req, node_id: 'node-b' }), 'FAILED_PRECONDITION');
    expect(msg).toContain('node node-a');
    expect(await expectCode(ctl('ControllerPublishVolume', { ...req, readonly: true }), 'ALREADY_EXISTS')).toContain('read-write');
    const got = await ctl('ControllerGetVolume', { volume_id: 'single' });
    expect(got.status).toEqual({ published_node_ids: ['node-a'], volume_condition: { abnormal: false, message: 'volume is healthy' } });
    await repeatedOk('ControllerUnpublishVolume', () => ctl('ControllerUnpublishVolume', { volume_id: 'single', node_id: 'node-a' }));
    expect((await ctl('ControllerGetVolume', { volume_id: 'single' })).status.published_node_ids).toEqual([]);
    await repeatedOk('ControllerUnpublishVolume of an unknown volume', () => ctl('ControllerUnpublishVolume', { volume_id: 'gone-vol', node_id: 'node-a' }));
  });

  it('publishes a multi-node dir volume to several nodes; an empty node id unpublishes from all', async () => {
    await ctl('CreateVolume', { name: 'many', volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    await csi.registerNodes('node-b', 'node-c');
    for (const node of ['node-a', 'node-b', 'node-c'])
      await ctl('ControllerPublishVolume', { volume_id: 'many', node_id: node, volume_capability: mountCap('', 'MULTI_NODE_MULTI_WRITER') });
    expect((await ctl('ControllerGetVolume', { volume_id: 'many' })).status.published_node_ids).toEqual(['node-a', 'node-b', 'node-c']);
    await ctl('ControllerUnpublishVolume', { volume_id: 'many' });
    expect(record('many').attachments).toEqual([]);
  });

  it('refuses a capability the volume cannot serve', async () => {
    await ctl('CreateVolume', { name: 'cap-check', volume_capabilities: [mountCap()], capacity_range: size(MiB) });
    await expectCode(ctl('ControllerPublishVolume', { volume_id: 'cap-check', node_id: 'node-a', volume_capability: mountCap('', 'MULTI_NODE_MULTI_WRITER') }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerPublishVolume', { volume_id: 'cap-check', node_id: 'node-a', volume_capability: mountCap('xfs') }), 'INVALID_ARGUMENT');
    expect(record('cap-check').attachments).toEqual([]);
  });
});

describe('ControllerPublishVolume with a volume limit', () => {
  const limited = useCsiServer({ nodeId: 'node-s', args: ['--max-volumes-per-node', '1'] });

  it('answers NOT_FOUND for a node that never registered, RESOURCE_EXHAUSTED past the limit', async () => {
    for (const name of ['lim-1', 'lim-2']) await limited.ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const pub = (volume_id: string, node_id: string) => limited.ctl('ControllerPublishVolume', { volume_id, node_id, volume_capability: mountCap() });
    expect(await expectCode(pub('lim-1', 'node-x'), 'NOT_FOUND')).toContain('node node-x is not registered');
    await pub('lim-1', 'node-s');
    expect(await expectCode(pub('lim-2', 'node-s'), 'RESOURCE_EXHAUSTED')).toContain('node node-s');
    await pub('lim-1', 'node-s');
  });
});

describe('ValidateVolumeCapabilities', () => {
  it('requires id and capabilities; unknown volume is NOT_FOUND', async () => {
    await ctl('CreateVolume', { name: 'val', volume_capabilities: [mountCap()], capacity_range: size(MiB) });
    await expectCode(ctl('ValidateVolumeCapabilities', { volume_capabilities: [mountCap()] }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ValidateVolumeCapabilities', { volume_id: 'val' }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ValidateVolumeCapabilities', { volume_id: 'nope', volume_capabilities: [mountCap()] }), 'NOT_FOUND');
  });

  it('confirms what the volume supports and explains what it does not', async () => {
    await ctl('CreateVolume', { name: 'val2', volume_capabilities: [mountCap()], capacity_range: size(MiB) });
    const ok = await ctl('ValidateVolumeCapabilities', { volume_id: 'val2', volume_capabilities: [mountCap('ext4'), blockCap()] });
    expect(ok.message).toBe('');
    expect(ok.confirmed?.volume_capabilities.map((c) => c.access_type)).toEqual(['mount', 'block']);
    const no = await ctl('ValidateVolumeCapabilities', { volume_id: 'val2', volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')] });
    expect(no.confirmed).toBeNull();
    expect(no.message).toContain('one node at a time can mount');
    const redirect = await ctl('ValidateVolumeCapabilities', { volume_id: 'val2', volume_capabilities: [mountCap()], volume_context: { source: '/etc' } });
    expect(redirect.confirmed).toBeNull();
  });
});

describe('GetCapacity', () => {
  it('reports the free bytes of the data root filesystem', async () => {
    const r = await ctl('GetCapacity', { volume_capabilities: [mountCap()] });
    const st = statfsSync(csi.s.dataRoot);
    const free = st.bavail * st.bsize;
    expect(Number(r.available_capacity)).toBeGreaterThan(0);
    // Other writers share /tmp: equal within 1 GiB, not to the byte.
    expect(Math.abs(Number(r.available_capacity) - free)).toBeLessThan(GiB);
  });
});

describe('snapshots (catalog side)', () => {
  it('requires name and source; a missing source is NOT_FOUND', async () => {
    await expectCode(ctl('CreateSnapshot', { source_volume_id: 'x' }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateSnapshot', { name: 'snap-x' }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateSnapshot', { name: 'snap\nx', source_volume_id: 'x' }), 'INVALID_ARGUMENT');
    await expectCode(ctl('CreateSnapshot', { name: 'snap-x', source_volume_id: 'no-such-vol' }), 'NOT_FOUND');
    await expectCode(ctl('GetSnapshot', { snapshot_id: 'snap-x' }), 'NOT_FOUND');
    await expectCode(ctl('GetSnapshot', {}), 'INVALID_ARGUMENT');
    await expectCode(ctl('DeleteSnapshot', {}), 'INVALID_ARGUMENT');
    await repeatedOk('DeleteSnapshot unknown', () => ctl('DeleteSnapshot', { snapshot_id: 'never-was' }));
  });

  it('answers the same snapshot for the same name and source, ALREADY_EXISTS for another source', async () => {
    await ctl('CreateVolume', { name: 'snap-src', volume_capabilities: [mountCap()], capacity_range: size(8 * MiB) });
    await ctl('CreateVolume', { name: 'snap-other', volume_capabilities: [mountCap()], capacity_range: size(8 * MiB) });
    const r = await repeatedOk('CreateSnapshot', () => ctl('CreateSnapshot', { name: 'snap-1', source_volume_id: 'snap-src' }));
    expect(r.snapshot).toMatchObject({ snapshot_id: 'snap-1', source_volume_id: 'snap-src', size_bytes: String(8 * MiB), ready_to_use: true, group_snapshot_id: '' });
    expect(Number(r.snapshot.creation_time.seconds)).toBeGreaterThan(1.6e9);
    expect(await ctl('GetSnapshot', { snapshot_id: 'snap-1' })).toEqual(r);
    expect(await expectCode(ctl('CreateSnapshot', { name: 'snap-1', source_volume_id: 'snap-other' }), 'ALREADY_EXISTS')).toContain('snap-src');
    await repeatedOk('DeleteSnapshot', () => ctl('DeleteSnapshot', { snapshot_id: 'snap-1' }));
    await expectCode(ctl('GetSnapshot', { snapshot_id: 'snap-1' }), 'NOT_FOUND');
  });
});

describe('ListVolumes and ListSnapshots paging (own server, known contents)', () => {
  const list = useCsiServer({ nodeId: 'node-l' });
  const c = list.ctl;

  it('pages volumes with opaque tokens, each entry with its status', async () => {
    const ids = ['pg-1', 'pg-2', 'pg-3', 'pg-4', 'pg-5'];
    for (const name of ids)
      await list.ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    await list.ctl('ControllerPublishVolume', { volume_id: 'pg-2', node_id: 'node-l', volume_capability: mountCap() });
    const seen: string[] = [];
    const tokens: string[] = [];
    let token = '';
    do {
      const page = await c('ListVolumes', { max_entries: 2, starting_token: token });
      expect(page.entries.length).toBeLessThanOrEqual(2);
      seen.push(...page.entries.map((e) => e.volume.volume_id));
      token = page.next_token;
      if (token) tokens.push(token);
    } while (token);
    expect(seen).toEqual(ids);
    expect(tokens).toHaveLength(2);
    expect(tokens.some((t) => t.includes('pg-'))).toBe(false);
    const all = await c('ListVolumes', {});
    expect(all.next_token).toBe('');
    expect(all.entries.map((e) => e.status.published_node_ids)).toEqual([[], ['node-l'], [], [], []]);
    expect(all.entries[0]?.status.volume_condition).toEqual({ abnormal: false, message: 'volume is healthy' });
  });

  it('answers ABORTED for a token it did not issue, INVALID_ARGUMENT for a negative page size', async () => {
    await expectCode(c('ListVolumes', { starting_token: 'invalid-token' }), 'ABORTED');
    await expectCode(c('ListSnapshots', { starting_token: 'invalid-token' }), 'ABORTED');
    const volumeToken = (await c('ListVolumes', { max_entries: 1 })).next_token;
    expect(volumeToken).not.toBe('');
    await expectCode(c('ListSnapshots', { starting_token: volumeToken }), 'ABORTED');
    await expectCode(c('ListVolumes', { max_entries: -1 }), 'INVALID_ARGUMENT');
  });

  it('pages and filters snapshots', async () => {
    for (const [name, src] of [['ps-a', 'pg-1'], ['ps-b', 'pg-1'], ['ps-c', 'pg-3']] as const)
      await list.ctl('CreateSnapshot', { name, source_volume_id: src });
    const first = await c('ListSnapshots', { max_entries: 2 });
    expect(first.entries.map((e) => e.snapshot.snapshot_id)).toEqual(['ps-a', 'ps-b']);
    const second = await c('ListSnapshots', { max_entries: 2, starting_token: first.next_token });
    expect(second.entries.map((e) => e.snapshot.snapshot_id)).toEqual(['ps-c']);
    expect(second.next_token).toBe('');
    const bySource = await c('ListSnapshots', { source_volume_id: 'pg-1' });
    expect(bySource.entries.map((e) => e.snapshot.snapshot_id)).toEqual(['ps-a', 'ps-b']);
    const byId = await c('ListSnapshots', { snapshot_id: 'ps-c' });
    expect(byId.entries.map((e) => e.snapshot.source_volume_id)).toEqual(['pg-3']);
    expect((await c('ListSnapshots', { snapshot_id: 'no-such' })).entries).toEqual([]);
    expect((await c('ListSnapshots', { snapshot_id: '../bad' })).entries).toEqual([]);
  });
});

describe('one operation per volume at a time', () => {
  it('answers ABORTED to a second call on a volume while the first is still running', async () => {
    // Hold the catalog lock from outside, so the first CreateVolume stays in flight for certain.
    const core = openCore(loadConfig(csi.s.env));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = core.catalog.lock('volume', 'busy', async () => {
      locked();
      await held;
    });
    await isLocked;
    const req = { name: 'busy', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) };
    const a = outcome(ctl('CreateVolume', req));
    const b = outcome(ctl('CreateVolume', req));
    const first = await Promise.race([a, b]);
    expect(first.code).toBe('ABORTED');
    expect(first.message).toContain('CreateVolume on volume/busy is still in progress');
    release();
    await holder;
    const both = await Promise.all([a, b]);
    expect(both.map((o) => o.code).sort()).toEqual(['ABORTED', 'OK']);
    expect((await ctl('ControllerGetVolume', { volume_id: 'busy' })).volume.volume_id).toBe('busy');
  });
});
