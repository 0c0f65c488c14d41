/**
 * Where a node is, as key-value segments (the CSI notion of topology, which NodeGetInfo reports and
 * CreateVolume's accessibility requirements name). twinvol has one key: the node itself. It lives in
 * the core because the node registry (shared/core/nodes.ts) and volume placement
 * (shared/core/placement.ts) both need it, whichever front end asks.
 */
export type Segments = Record<string, string>;

export const TOPOLOGY_KEY = 'topology.csi.twinvol.io/node';

export function nodeSegments(nodeName: string): Segments {
  return { [TOPOLOGY_KEY]: nodeName };
}
