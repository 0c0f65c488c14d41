import { notFound } from '../errors.js';
import type { NodeRecord, Origin } from '../model.js';
import { SCHEMA_VERSION } from '../store/json-record.js';
import { type Segments } from '../topology.js';
import { sameStringMap } from '../string-maps.js';
import { type NodeId, validateNodeName, validateStringMap } from '../validate.js';
import { type Core, now } from './core.js';

/**
 * Makes a node known to the catalog. A CSI node server calls this as it starts, with its topology: an
 * unchanged registration writes nothing, a changed topology is rewritten. FlexVolume knows no
 * topology (`undefined`): it only makes sure the node exists, leaving a node server's record alone.
 */
export async function registerNode(core: Core, nodeId: NodeId, topology: Segments | undefined, origin: Origin): Promise<NodeRecord> {
  validateNodeName(nodeId);
  const segments = topology && validateStringMap(topology, 'topology', 4096);
  const fits = (r: NodeRecord | undefined): r is NodeRecord => Boolean(r && (!segments || sameStringMap(r.topology, segments)));
  // Most calls (every FlexVolume attach, every restart) find the node as it is: read before locking.
  const current = await core.catalog.getNode(nodeId);
  if (fits(current)) return current;
  return core.catalog.lock('node', nodeId, async () => {
    const existing = await core.catalog.getNode(nodeId);
    if (fits(existing)) return existing;
    const record: NodeRecord = { schema: SCHEMA_VERSION, nodeId, topology: segments ?? {}, registeredBy: origin, registeredAt: now() };
    await core.catalog.putNode(record);
    return record;
  });
}

/** NotFound for a node that never registered: the CSI spec's answer to ControllerPublishVolume. */
export async function requireRegisteredNode(core: Core, nodeId: NodeId): Promise<NodeRecord> {
  const node = await core.catalog.getNode(validateNodeName(nodeId));
  if (!node) throw notFound(`node ${nodeId} is not registered: no twinvol node server has started there, and no FlexVolume attach named it`);
  return node;
}

export function listNodes(core: Core): Promise<NodeRecord[]> {
  return core.catalog.listNodes();
}
