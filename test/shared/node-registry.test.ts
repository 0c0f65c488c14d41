import { describe, expect, it } from 'vitest';
import { attach } from '../../shared/core/attachments.js';
import type { Core } from '../../shared/core/core.js';
import { listNodes, registerNode, requireRegisteredNode } from '../../shared/core/nodes.js';
import { createVolume } from '../../shared/core/volumes.js';
import { useScratchCore } from './core-scratch.js';
import { expectRejects } from './expect-error.js';
import { nid, vid } from '../helpers/ids.js';

let core: Core;
useScratchCore((_s, c) => {
  core = c;
});

describe('the node registry', () => {
  it('registers once, rewrites a changed topology, and keeps a node server\'s topology from FlexVolume', async () => {
    const first = await registerNode(core, nid('node-b'), { zone: 'a' }, 'csi');
    expect(await registerNode(core, nid('node-b'), { zone: 'a' }, 'csi')).toEqual(first);
    const moved = await registerNode(core, nid('node-b'), { zone: 'b' }, 'csi');
    expect(moved.topology).toEqual({ zone: 'b' });
    expect(await core.catalog.getNode('node-b')).toEqual(moved);
    // FlexVolume knows no topology: it only makes sure the node exists.
    expect(await registerNode(core, nid('node-b'), undefined, 'flex')).toEqual(moved);
    expect(await registerNode(core, nid('node-f'), undefined, 'flex')).toMatchObject({ nodeId: 'node-f', topology: {}, registeredBy: 'flex' });
    expect((await listNodes(core)).map((n) => n.nodeId)).toEqual(['node-b', 'node-f']);
  });

  it('keeps node ids of 253 characters apart, though their file names are cut short', async () => {
    const long = (c: string) => `n${'x'.repeat(251)}${c}`;
    await registerNode(core, nid(long('1')), {}, 'csi');
    await expectRejects(requireRegisteredNode(core, nid(long('2'))), 'NotFound', 'is not registered');
    await registerNode(core, nid(long('2')), {}, 'flex');
    expect((await listNodes(core)).map((n) => n.registeredBy)).toEqual(['csi', 'flex']);
  });

  it('attach refuses a node that never registered only when asked to, naming the node', async () => {
    await createVolume(core, { id: 'v', backend: 'dir', capacityBytes: 2 ** 20, access: 'multi-node', createdBy: 'cli' });
    await expectRejects(attach(core, vid('v'), nid('node-x'), { readonly: false, via: 'csi', registeredNodesOnly: true }), 'NotFound', 'node node-x is not registered');
    expect((await core.catalog.requireVolume('v')).attachments).toEqual([]);
    await attach(core, vid('v'), nid('node-y'), { readonly: false, via: 'cli' });
    await registerNode(core, nid('node-x'), {}, 'csi');
    await attach(core, vid('v'), nid('node-x'), { readonly: false, via: 'csi', registeredNodesOnly: true });
    expect((await core.catalog.requireVolume('v')).attachments.map((a) => a.node)).toEqual(['node-y', 'node-x']);
  });
});
