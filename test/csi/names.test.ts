import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { idForName } from '../../shared/names.js';
import { runCli } from '../helpers/flex-runner.js';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { repeatedOk } from './helpers/repeat.js';
import { MiB, mountCap, size } from './helpers/requests.js';

// CreateVolume and CreateSnapshot take any Unicode name of up to 128 bytes without control characters
// (CSI spec); ids stay file-name safe (shared/validate.ts), so other names get a derived id
// (shared/names.ts). Names csi-sanity sends, among others.
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl } = csi;

const create = (name: string, bytes = MiB) =>
  ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(bytes) });
const recordOf = (kind: 'volumes' | 'snapshots', id: string) =>
  JSON.parse(readFileSync(join(csi.s.dataRoot, kind, id, kind === 'volumes' ? 'volume.json' : 'snapshot.json'), 'utf8')) as Record<string, unknown>;
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

describe('CreateVolume names', () => {
  it('a name that is a valid id is the id, and the record holds no separate name', async () => {
    const { volume } = await create('plain-name.1');
    expect(volume.volume_id).toBe('plain-name.1');
    expect(recordOf('volumes', 'plain-name.1')).not.toHaveProperty('name');
  });

  it.each([
    ['csi-sanity\'s', 'sanity-max-attach-limit-vol+1-F5B8E5FB', 'sanity-max-attach-limit-vol-1-F5B8E5FB__'],
    ['a Unicode', 'données/été ☃', 'donn-es-t-__'],
    ['a dotted', '..hidden..name', 'hidden.name__'],
  ])('%s name gets a readable derived id; a repeat finds the same volume; the record keeps the name', async (_what, name, prefix) => {
    const first = await repeatedOk('CreateVolume', () => create(name));
    const id = first.volume.volume_id;
    expect(id.startsWith(prefix)).toBe(true);
    expect(id).toMatch(ID);
    expect(id).toMatch(/__[0-9a-f]{32}$/);
    expect(recordOf('volumes', id)).toMatchObject({ id, name });
    expect((await ctl('ControllerGetVolume', { volume_id: id })).volume.volume_id).toBe(id);
    expect((await ctl('ListVolumes', {})).entries.map((e) => e.volume.volume_id)).toContain(id);
    expect(await expectCode(create(name, 2 * MiB), 'ALREADY_EXISTS')).toContain('size');
    await ctl('DeleteVolume', { volume_id: id });
    await expectCode(ctl('ControllerGetVolume', { volume_id: id }), 'NOT_FOUND');
  });

  it('a name of 128 bytes is fine, longer is not; empty names and control characters are INVALID_ARGUMENT', async () => {
    const long = 'é'.repeat(64);
    expect((await create(long)).volume.volume_id).toMatch(ID);
    expect(await expectCode(create(`${long}x`), 'INVALID_ARGUMENT')).toBe('name is longer than 128 bytes');
    expect(await expectCode(create(''), 'INVALID_ARGUMENT')).toBe('name is required');
    for (const bad of ['tab\there', 'bell\u0007', 'line\nbreak', 'c1\u0085control', 'del\u007f'])
      expect(await expectCode(create(bad), 'INVALID_ARGUMENT')).toBe('name must not contain control characters');
  });

  it('a name that is itself a derived id never lands on the volume it was derived for', async () => {
    const derived = (await create('vol+1')).volume.volume_id;
    const other = (await create(derived)).volume.volume_id;
    expect(other).not.toBe(derived);
    expect(recordOf('volumes', other)).toMatchObject({ name: derived });
    expect((await create('vol+1')).volume.volume_id).toBe(derived);
  });

  it('a volume the administrator made under a name\'s derived id is not that name\'s volume', async () => {
    const id = idForName('by+hand');
    expect((await runCli(csi.s.env, ['create', id, '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    expect(await expectCode(create('by+hand'), 'ALREADY_EXISTS')).toBe(`volume id ${id} already belongs to a volume of another name`);
  });
});

describe('CreateSnapshot names', () => {
  it('any allowed name works, with a derived id that a repeat finds again', async () => {
    await create('snap-src');
    const name = 'snapshot #1 of snap-src';
    const first = await repeatedOk('CreateSnapshot', () => ctl('CreateSnapshot', { name, source_volume_id: 'snap-src' }));
    const id = first.snapshot.snapshot_id;
    expect(id).toMatch(/^snapshot-1-of-snap-src__[0-9a-f]{32}$/);
    expect(recordOf('snapshots', id)).toMatchObject({ id, name, sourceVolumeId: 'snap-src' });
    expect((await ctl('GetSnapshot', { snapshot_id: id })).snapshot.snapshot_id).toBe(id);
    await create('snap-src-2');
    expect(await expectCode(ctl('CreateSnapshot', { name, source_volume_id: 'snap-src-2' }), 'ALREADY_EXISTS')).toContain('source volume snap-src');
    expect(await expectCode(ctl('CreateSnapshot', { name: 'bad\u0000name', source_volume_id: 'snap-src' }), 'INVALID_ARGUMENT')).toBe('name must not contain control characters');
    expect((await ctl('CreateSnapshot', { name: 'plain-snap', source_volume_id: 'snap-src' })).snapshot.snapshot_id).toBe('plain-snap');
    expect(recordOf('snapshots', 'plain-snap')).not.toHaveProperty('name');
    await ctl('DeleteSnapshot', { snapshot_id: id });
    await ctl('DeleteSnapshot', { snapshot_id: 'plain-snap' });
  });
});
