import { nodeSegments } from '../shared/index.js';
import type { Topology } from './csi-types.js';

/** This node's place, as NodeGetInfo reports it (the segments are the core's: shared/topology.ts). */
export function nodeTopology(nodeId: string): Topology {
  return { segments: nodeSegments(nodeId) };
}
