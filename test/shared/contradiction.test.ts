import { describe, expect, it } from 'vitest';
import { contradiction } from '../../shared/core/contradiction.js';
import type { VolumeRecord } from '../../shared/model.js';
import { vid } from '../helpers/ids.js';

const tmpfs: VolumeRecord = {
  schema: 1,
  id: vid('scratch'),
  backend: 'static',
  capacityBytes: 0,
  fsType: 'tmpfs',
  access: 'single-node',
  source: 'tmpfs',
  mountOptions: ['size=8m', 'mode=0755'],
  parameters: {},
  attachments: [],
  createdBy: 'cli',
  createdAt: '2026-11-22T00:00:00.000Z',
};

describe('contradiction: a request may repeat the catalog, never contradict it', () => {
  it('accepts a map that repeats the record, keys it does not know, and empty values', () => {
    const repeat = { volumeId: 'scratch', backend: 'static', fsType: 'tmpfs', source: 'tmpfs', mountOptions: 'size=8m,mode=0755' };
    expect(contradiction(tmpfs, repeat, 'option')).toBeUndefined();
    expect(contradiction(tmpfs, { size: '1Gi', 'kubernetes.io/fsType': 'ext4', source: '' }, 'option')).toBeUndefined();
  });

  it('holds a value the platform filled in only against a volume that has the property, and lets the PV\'s own key speak first', () => {
    expect(contradiction(tmpfs, {}, 'option', { fsType: 'ext4' })).toMatch(/option "fsType" does not match volume scratch/);
    expect(contradiction(tmpfs, {}, 'option', { fsType: 'tmpfs' })).toBeUndefined();
    expect(contradiction(tmpfs, { fsType: 'tmpfs' }, 'option', { fsType: 'ext4' })).toBeUndefined();
    expect(contradiction({ ...tmpfs, fsType: '' }, {}, 'option', { fsType: 'ext4' })).toBeUndefined();
  });

  it.each([
    ['source', '/etc'],
    ['Source', '/etc'],
    ['mountOptions', 'size=64m'],
    ['backend', 'dir'],
    ['FSTYPE', 'ext4'],
    ['volumeId', 'other'],
    ['path', '/'],
    ['device', '/dev/sda'],
  ])('refuses %s = %s, naming the key and the volume', (key, value) => {
    expect(contradiction(tmpfs, { [key]: value }, 'volume_context key')).toBe(
      `volume_context key "${key}" does not match volume scratch: what is mounted comes from the catalog, not the request`,
    );
  });

  // Found by test/fuzz/csi-requests.test.ts: a volume_context key "__proto__" reached the prototype of
  // the table of described keys and was called (INTERNAL "own is not a function"); "constructor" was
  // refused as a contradiction of a property no volume has.
  it.each(['__proto__', 'constructor', 'CONSTRUCTOR'])('takes the key %s as one it does not know', (key) => {
    const claims: Record<string, string> = Object.fromEntries([[key, 'x']]);
    expect(contradiction(tmpfs, claims, 'volume_context key')).toBeUndefined();
    expect(contradiction(tmpfs, {}, 'option', claims)).toBeUndefined();
  });
});
