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

/** Whether two segment maps hold the same keys and values. */
export function sameSegments(a: Readonly<Segments>, b: Readonly<Segments>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
