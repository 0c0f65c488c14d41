import { nativeMount } from '../../shared/native-mount.js';

/**
 * An addon's exports as a test of shared/native-mount.ts parseAddon makes them: the flag numbers of
 * the addon built here, mount and umount answering 0, and `extra` (functions under test, or values
 * that replace these). parseAddon reads what an addon built elsewhere or earlier may answer; a real
 * addon cannot be made to answer it.
 */
export function addonExports(extra: Record<string, unknown> = {}): Record<string, unknown> {
  const native = nativeMount();
  if (!native) throw new Error('build/Release/twinvol_mount.node did not load: npm ci builds it (scripts/build-native.mjs)');
  const flags = Object.fromEntries(Object.entries(native).filter(([, v]) => typeof v === 'number'));
  return { ...flags, mount: () => 0, umount: () => 0, ...extra };
}
