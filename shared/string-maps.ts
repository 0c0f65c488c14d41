/**
 * Whether two string maps (CSI parameters, topology segments) hold the same keys and values. Key
 * order means nothing here: protobuf maps arrive in any order, so JSON text cannot compare them.
 */
export function sameStringMap(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}
