/**
 * JSON as kubelet's Go encoder writes FlexVolume options: compact, keys sorted, and <, >, & escaped
 * as \u003c, \u003e, \u0026 (plus U+2028/2029). Tests send exactly these bytes.
 */
export function goJson(options: Record<string, string>): string {
  const sorted = Object.fromEntries(Object.entries(options).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return JSON.stringify(sorted)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}
