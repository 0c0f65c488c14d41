import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Topology } from '../../csi/csi-types.js';
import { expectCode } from './helpers/client.js';
import { type CsiSuite, useCsiServer } from './helpers/fixture.js';
import { repeatedOk } from './helpers/repeat.js';
import { MiB, mountCap, size } from './helpers/requests.js';
import { treeOf } from './helpers/tree.js';

// accessible_topology (shared/core/placement.ts): a node-local data root (--data-root-scope node)
// holds volumes on this server's node only, and says so; a shared one (the default) says nothing.
const KEY = 'topology.csi.twinvol.io/node';
const on = (node: string): Topology => ({ segments: { [KEY]: node } });
type Requirement = { requisite?: Topology[]; preferred?: Topology[] };

const create = (csi: CsiSuite, name: string, accessibility_requirements?: Requirement) =>
  csi.ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB), accessibility_requirements });
const pluginCapabilities = async (csi: CsiSuite) =>
  (await csi.identity('GetPluginCapabilities')).capabilities.map((c) => (c.type === 'service' ? c.service.type : c.volume_expansion.type));

describe('a node-local data root', () => {
  const csi = useCsiServer({ nodeId: 'node-t', args: ['--data-root-scope', 'node'] });

  it('advertises VOLUME_ACCESSIBILITY_CONSTRAINTS', async () => {
    expect(await pluginCapabilities(csi)).toContain('VOLUME_ACCESSIBILITY_CONSTRAINTS');
  });

  it('places a volume on this node and reports it in CreateVolume, ListVolumes and ControllerGetVolume', async () => {
    const made = await repeatedOk('CreateVolume', () => create(csi, 'topo-1'));
    expect(made.volume.accessible_topology).toEqual([on('node-t')]);
    expect((await csi.ctl('ControllerGetVolume', { volume_id: 'topo-1' })).volume.accessible_topology).toEqual([on('node-t')]);
    const listed = (await csi.ctl('ListVolumes', {})).entries.find((e) => e.volume.volume_id === 'topo-1');
    expect(listed?.volume.accessible_topology).toEqual([on('node-t')]);
    const record = JSON.parse(readFileSync(join(csi.s.dataRoot, 'volumes/topo-1/volume.json'), 'utf8')) as Record<string, unknown>;
    expect(record.topology).toEqual({ [KEY]: 'node-t' });
  });

  it('meets a requirement this node is in, preferred first, then requisite', async () => {
    const r = await create(csi, 'topo-2', { requisite: [on('node-x'), on('node-t')], preferred: [on('node-x'), on('node-t')] });
    expect(r.volume.accessible_topology).toEqual([on('node-t')]);
    expect((await create(csi, 'topo-3', { requisite: [on('node-t'), on('node-y')] })).volume.accessible_topology).toEqual([on('node-t')]);
    // Preferences alone never refuse: the spec lets the plugin choose among all its topologies.
    expect((await create(csi, 'topo-4', { preferred: [on('node-x')] })).volume.accessible_topology).toEqual([on('node-t')]);
  });

  it('is RESOURCE_EXHAUSTED for requisite topologies this node is in none of, writing nothing', async () => {
    const before = treeOf(csi.s.dataRoot);
    for (const requisite of [[on('node-x')], [{ segments: { 'topology.kubernetes.io/zone': 'a' } }], [{ segments: { [KEY]: 'node-t', zone: 'a' } }]])
      expect(await expectCode(create(csi, 'topo-no', { requisite }), 'RESOURCE_EXHAUSTED')).toContain('node-t');
    expect(treeOf(csi.s.dataRoot)).toEqual(before);
  });

  it('is INVALID_ARGUMENT for a requirement the spec does not allow', async () => {
    expect(await expectCode(create(csi, 'topo-bad', { requisite: [], preferred: [] }), 'INVALID_ARGUMENT')).toContain('requisite or preferred');
    expect(await expectCode(create(csi, 'topo-bad', { requisite: [on('node-t')], preferred: [on('node-x')] }), 'INVALID_ARGUMENT')).toContain('preferred');
    await expectCode(csi.ctl('ControllerGetVolume', { volume_id: 'topo-bad' }), 'NOT_FOUND');
  });

  it('answers a repeat that the existing volume cannot meet with ALREADY_EXISTS', async () => {
    await create(csi, 'topo-5');
    await create(csi, 'topo-5', { requisite: [on('node-t')] });
    expect(await expectCode(create(csi, 'topo-5', { requisite: [on('node-x')] }), 'ALREADY_EXISTS')).toContain('topolog');
  });
});

describe('a shared data root (the default)', () => {
  const csi = useCsiServer({ nodeId: 'node-u' });

  it('advertises no accessibility constraints and reports no topology, whatever was asked', async () => {
    expect(await pluginCapabilities(csi)).not.toContain('VOLUME_ACCESSIBILITY_CONSTRAINTS');
    expect((await create(csi, 'shared-1')).volume.accessible_topology).toEqual([]);
    expect((await create(csi, 'shared-2', { requisite: [on('node-x')] })).volume.accessible_topology).toEqual([]);
    expect((await csi.ctl('ControllerGetVolume', { volume_id: 'shared-1' })).volume.accessible_topology).toEqual([]);
  });
});
