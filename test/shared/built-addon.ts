import { type NativeMount, nativeMount } from '../../shared/native-mount.js';

type Optional = { [K in keyof NativeMount]-?: undefined extends NativeMount[K] ? K : never }[keyof NativeMount];

/**
 * The addon `npm ci` built here (build/Release), with the optional `calls` it must have: a test of a
 * call fails with this reason, not a TypeError, where the build did not make it.
 */
export function builtAddon<K extends Optional = never>(...calls: K[]): NativeMount & Required<Pick<NativeMount, K>> {
  const native = nativeMount();
  const missing = native ? calls.filter((c) => native[c] === undefined) : ['the addon'];
  if (!native || missing.length) throw new Error(`build/Release/twinvol_mount.node lacks ${missing.join(', ')}: npm ci builds it (scripts/build-native.mjs)`);
  return native as NativeMount & Required<Pick<NativeMount, K>>;
}

/**
 * An addon's exports as a test of shared/native-mount.ts parseAddon makes them: the flag numbers of
 * the addon built here, mount and umount answering 0, and `extra` (functions under test, or values
 * that replace these). parseAddon reads what an addon built elsewhere or earlier may answer; a real
 * addon cannot be made to answer it.
 */
export function addonExports(extra: Record<string, unknown> = {}): Record<string, unknown> {
  const flags = Object.fromEntries(Object.entries(builtAddon()).filter(([, v]) => typeof v === 'number'));
  return { ...flags, mount: () => 0, umount: () => 0, ...extra };
}
