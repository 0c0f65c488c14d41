import { describe, expect, it } from 'vitest';
import type { Topology } from '../../csi/csi-types.js';
import { expectCode } from './helpers/client.js';
import { type CsiSuite, useCsiServer } from './helpers/fixture.js';
import { blockCap, mountCap } from './helpers/requests.js';

/**
 * GetCapacity: "If volume_capabilities or parameters is specified in the request, the Plugin SHALL
 * take those into consideration", and the capacity reported for an accessible_topology is that of
 * the storage volumes in it can be provisioned from. Storage no volume of the request can be made on
 * has no capacity for it: 0. Parameters are the StorageClass's, held to CreateVolume's rules.
 */
const KEY = 'topology.csi.twinvol.io/node';
const on = (node: string): Topology => ({ segments: { [KEY]: node } });
const capacity = async (csi: CsiSuite, req: object) => Number((await csi.ctl('GetCapacity', req)).available_capacity);

describe('GetCapacity with a shared data root', () => {
  const csi = useCsiServer({ nodeId: 'node-a' });

  it('reports the free space for volumes the request can be made as', async () => {
    expect(await capacity(csi, {})).toBeGreaterThan(0);
    expect(await capacity(csi, { volume_capabilities: [mountCap('xfs')] })).toBeGreaterThan(0);
    expect(await capacity(csi, { volume_capabilities: [blockCap('MULTI_NODE_READER_ONLY')] })).toBeGreaterThan(0);
    expect(await capacity(csi, { volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')], parameters: { backend: 'dir' } })).toBeGreaterThan(0);
    expect(await capacity(csi, { parameters: { backend: 'dir', 'csi.storage.k8s.io/provisioner-secret-name': 's' } })).toBeGreaterThan(0);
  });

  it('reports 0 for capabilities no volume of the class can serve', async () => {
    // A block volume's filesystem is mounted by one node at a time; a dir volume has no device.
    expect(await capacity(csi, { volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')] })).toBe(0);
    expect(await capacity(csi, { volume_capabilities: [mountCap(), blockCap('MULTI_NODE_MULTI_WRITER')] })).toBe(0);
    expect(await capacity(csi, { volume_capabilities: [blockCap()], parameters: { backend: 'dir' } })).toBe(0);
    // Filesystem types twinvol does not make, or two at once, or another than the class's.
    expect(await capacity(csi, { volume_capabilities: [mountCap('btrfs')] })).toBe(0);
    expect(await capacity(csi, { volume_capabilities: [mountCap('ext4'), mountCap('xfs')] })).toBe(0);
    expect(await capacity(csi, { volume_capabilities: [mountCap('xfs')], parameters: { fsType: 'ext4' } })).toBe(0);
  });

  it('refuses parameters CreateVolume refuses, as CreateVolume does', async () => {
    await expectCode(csi.ctl('GetCapacity', { parameters: { fstype: 'ext4' } }), 'INVALID_ARGUMENT');
    await expectCode(csi.ctl('GetCapacity', { parameters: { backend: 'nfs' } }), 'INVALID_ARGUMENT');
    await expectCode(csi.ctl('GetCapacity', { parameters: { fsType: 'btrfs' } }), 'INVALID_ARGUMENT');
    await expectCode(csi.ctl('GetCapacity', { volume_capabilities: [{ mount: {} }] }), 'INVALID_ARGUMENT');
  });
});

describe('GetCapacity with a node-local data root', () => {
  const csi = useCsiServer({ nodeId: 'node-t', args: ['--data-root-scope', 'node'] });

  it('reports the free space for this node\'s topology, 0 for any other', async () => {
    expect(await capacity(csi, { accessible_topology: on('node-t') })).toBeGreaterThan(0);
    expect(await capacity(csi, {})).toBeGreaterThan(0);
    expect(await capacity(csi, { accessible_topology: on('node-x') })).toBe(0);
    expect(await capacity(csi, { accessible_topology: { segments: { 'topology.kubernetes.io/zone': 'z1' } } })).toBe(0);
  });
});
