import { describe, expect, it } from 'vitest';
import { CREATE_KEYS, pluginKeys, volumeContextOf, withoutCoKeys } from '../../../csi/parameters.js';
import type { VolumeRecord } from '../../../shared/model.js';
import { expectThrows } from '../../shared/expect-error.js';
import { vid } from '../../helpers/ids.js';

const CO_KEYS = {
  'csi.storage.k8s.io/pvc/name': 'data',
  'csi.storage.k8s.io/pvc/namespace': 'default',
  'csi.storage.k8s.io/pv/name': 'pvc-123',
  'csi.storage.k8s.io/provisioner-secret-name': 'creds',
};

describe('parameters: the CO\'s own keys say nothing about the volume', () => {
  it('csi.storage.k8s.io/ keys are dropped, every other key kept', () => {
    expect(withoutCoKeys({ ...CO_KEYS, backend: 'dir', 'example.com/x': 'y' })).toEqual({ backend: 'dir', 'example.com/x': 'y' });
  });

  it('a key that only resembles the prefix is the plugin\'s', () => {
    expect(withoutCoKeys({ 'csi.storage.k8s.io': 'a', 'CSI.storage.k8s.io/pvc/name': 'b' })).toEqual({ 'csi.storage.k8s.io': 'a', 'CSI.storage.k8s.io/pvc/name': 'b' });
  });
});

describe('parameters: a StorageClass key twinvol does not read is INVALID_ARGUMENT, not a silent default', () => {
  it('CreateVolume reads backend, fsType, source and mountOptions', () => {
    expect([...CREATE_KEYS]).toEqual(['backend', 'fsType', 'source', 'mountOptions']);
  });

  it('known keys come back with the CO keys removed', () => {
    expect(pluginKeys({ ...CO_KEYS, backend: 'block', fsType: 'xfs' }, 'parameters', CREATE_KEYS)).toEqual({ backend: 'block', fsType: 'xfs' });
  });

  it('a typo is refused, naming the key and what twinvol reads', () => {
    expectThrows(() => pluginKeys({ fstype: 'xfs' }, 'parameters', CREATE_KEYS), 'InvalidArgument', 'parameters: unknown key "fstype" (twinvol reads backend, fsType, source, mountOptions)');
  });

  it('where twinvol reads no keys at all, any plugin key is refused and the message says none', () => {
    expectThrows(() => pluginKeys({ tier: 'gold' }, 'parameters', []), 'InvalidArgument', '(twinvol reads none)');
    expect(pluginKeys(CO_KEYS, 'parameters', [])).toEqual({});
  });

  it('__proto__ is an unknown key like any other, not one that vanishes', () => {
    expectThrows(() => pluginKeys(JSON.parse('{"__proto__": "x"}') as Record<string, string>, 'parameters', CREATE_KEYS), 'InvalidArgument', 'unknown key "__proto__"');
  });

  it('a hostile key is quoted clipped to 64 characters', () => {
    const err = expectThrows(() => pluginKeys({ ['k'.repeat(5000)]: 'v' }, 'parameters', CREATE_KEYS), 'InvalidArgument');
    expect(err.message).toContain(`"${'k'.repeat(64)}"`);
    expect(err.message).not.toContain('k'.repeat(65));
  });

  it('the map must be a map of strings within the protocol\'s size', () => {
    expectThrows(() => pluginKeys(JSON.parse('{"backend": 1}') as Record<string, string>, 'parameters', CREATE_KEYS), 'InvalidArgument', 'value of "backend" must be a string');
    expectThrows(() => pluginKeys({ backend: 'x'.repeat(70_000) }, 'parameters', CREATE_KEYS), 'InvalidArgument', 'parameters is larger than');
  });
});

describe('volume_context: what CreateVolume hands back and a later NodeStage may repeat', () => {
  const record = (backend: VolumeRecord['backend'], fsType: string): VolumeRecord => ({
    schema: 1, id: vid('v'), backend, capacityBytes: 1, fsType, access: 'single-node', parameters: { secretish: 'x' }, attachments: [], createdBy: 'csi', createdAt: '2026-01-01T00:00:00.000Z',
  });

  it('names the backend and, where there is one, the filesystem type; never the parameters', () => {
    expect(volumeContextOf(record('block', 'ext4'))).toEqual({ backend: 'block', fsType: 'ext4' });
    expect(volumeContextOf(record('dir', ''))).toEqual({ backend: 'dir' });
  });
});
