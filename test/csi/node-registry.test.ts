import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { flexOptions, runAdmin, runFlex } from '../helpers/flex-runner.js';
import { expectCode } from './helpers/client.js';
import { MiB, mountCap, size } from './helpers/requests.js';
import { createCsiScratch, type CsiScratch } from './helpers/scratch.js';
import { launchCsi, type RunningCsi } from './helpers/server.js';

// The catalog's node registry (shared/core/nodes.ts): ControllerPublishVolume to a node that never
// registered is NOT_FOUND, as the CSI spec asks. A node server registers its node as it starts; a
// FlexVolume attach registers the node the controller-manager names.
let controllerWorld: CsiScratch;
let nodeWorld: CsiScratch;
const servers: RunningCsi[] = [];
beforeEach(() => {
  controllerWorld = createCsiScratch('ctl');
  nodeWorld = createCsiScratch('node-b');
});
afterEach(async () => {
  for (const server of servers.splice(0)) await server.stop();
  nodeWorld.cleanup();
  controllerWorld.cleanup();
});

const nodeRecord = (id: string) => JSON.parse(readFileSync(join(controllerWorld.dataRoot, 'nodes', `${id}.json`), 'utf8')) as Record<string, unknown>;

/** node-b's node server, sharing the controller's catalog (its data root). */
const startNodeB = async () => {
  const server = await launchCsi(nodeWorld, { nodeId: 'node-b', args: ['--mode', 'node', '--data-root', controllerWorld.dataRoot] });
  servers.push(server);
  return server;
};

describe('the node registry', () => {
  it('ControllerPublishVolume is NOT_FOUND until the node server has started there', async () => {
    const controller = await launchCsi(controllerWorld, { nodeId: 'ctl', args: ['--mode', 'controller'] });
    servers.push(controller);
    const ctl = controller.client;
    await ctl.call('Controller', 'CreateVolume', { name: 'v1', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const publish = (node_id: string) => ctl.call('Controller', 'ControllerPublishVolume', { volume_id: 'v1', node_id, volume_capability: mountCap() });

    expect(await expectCode(publish('node-b'), 'NOT_FOUND')).toMatch(/^node node-b is not registered/);
    // A controller-only server is no node: it registered nothing, not even its own id.
    await expectCode(publish('ctl'), 'NOT_FOUND');
    expect((await ctl.call('Controller', 'ControllerGetVolume', { volume_id: 'v1' })).status.published_node_ids).toEqual([]);

    const first = await startNodeB();
    await publish('node-b');
    const registered = nodeRecord('node-b');
    expect(registered).toMatchObject({ nodeId: 'node-b', topology: { 'topology.csi.twinvol.io/node': 'node-b' }, registeredBy: 'csi' });

    // A restart registers again, which changes nothing.
    await first.stop();
    servers.splice(servers.indexOf(first), 1);
    await startNodeB();
    expect(nodeRecord('node-b')).toEqual(registered);
  });

  it('a FlexVolume attach registers the node it names, and `twinvol node list` shows every node', async () => {
    const controller = await launchCsi(controllerWorld, { nodeId: 'ctl', args: ['--mode', 'controller'] });
    servers.push(controller);
    const ctl = controller.client;
    await ctl.call('Controller', 'CreateVolume', { name: 'v2', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    await expectCode(ctl.call('Controller', 'ControllerPublishVolume', { volume_id: 'v2', node_id: 'node-f', volume_capability: mountCap() }), 'NOT_FOUND');

    // The controller-manager attaches v2 to node-f through FlexVolume: node-f is known from then on.
    expect((await runFlex(controllerWorld.env, ['attach', flexOptions('pv-2', { volumeId: 'v2' }), 'node-f'])).reply).toMatchObject({ status: 'Success' });
    expect(nodeRecord('node-f')).toMatchObject({ nodeId: 'node-f', topology: {}, registeredBy: 'flex' });
    expect((await runFlex(controllerWorld.env, ['detach', 'pv-2', 'node-f'])).reply).toMatchObject({ status: 'Success' });
    await ctl.call('Controller', 'ControllerPublishVolume', { volume_id: 'v2', node_id: 'node-f', volume_capability: mountCap() });

    await startNodeB();
    const listed = await runAdmin(controllerWorld.env, ['node', 'list']);
    expect(listed.stderr).toBe('');
    expect(listed.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(/^node-b\tcsi\t.*topology\.csi\.twinvol\.io\/node=node-b$/),
      expect.stringMatching(/^node-f\tflex\t/),
    ]);
  });
});
