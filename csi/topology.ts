import type { Topology } from './messages.js';

/**
 * The one topology key twinvol reports: the node. Volumes carry no topology of their own (any node
 * that sees the data root can attach any volume), so the CO may schedule them anywhere.
 */
export const TOPOLOGY_KEY = 'topology.csi.twinvol.io/node';

export function nodeTopology(nodeId: string): Topology {
  return { segments: { [TOPOLOGY_KEY]: nodeId } };
}
