import type { NativeMount } from './native-mount.js';

/*
 * Mount options (mount(8)'s words) as the flags of mount(2) and mount_setattr(2), for the mounts
 * shared/mounter.ts makes by system call rather than by mount(8).
 */

/** Each option that undoes another: asked for, it replaces the one the mount has. */
const OPPOSITE = new Map([
  ['ro', 'rw'], ['rw', 'ro'], ['nosuid', 'suid'], ['suid', 'nosuid'], ['nodev', 'dev'], ['dev', 'nodev'], ['noexec', 'exec'], ['exec', 'noexec'],
  ['nodiratime', 'diratime'], ['diratime', 'nodiratime'],
]);
const ATIME = new Set(['noatime', 'relatime', 'strictatime']);

/**
 * The options of a bind's remount. The kernel sets a bind's flags to exactly those it is given, so
 * the flags the new mount has now (inherited from the filesystem its source lies on: nosuid, nodev,
 * noexec, the atime rule) are given again, with those asked for in place of their opposites. Given
 * /proc/self/fd/3 rather than a path, mount(8) cannot look them up itself: a read-only publish of a
 * directory on a nosuid,nodev,noexec filesystem once came out without all three.
 */
/**
 * The options a read-only mount is made with: every rw dropped, since mount(8) and a remount read
 * options in order and a later rw undid the ro (a CO's flags on a stage, a bind from a staging that
 * is its record alone, what a repeat checks the kernel's table against, and a static volume's own
 * options, shared/backends/static.ts).
 */
export function heldToReading(readonly: boolean, options: readonly string[]): string[] {
  return readonly ? options.filter((option) => option !== 'rw') : [...options];
}

export function remountOptions(current: readonly string[], asked: readonly string[]): string[] {
  // No atime word in mountinfo is strictatime: said, or a remount without one makes it relatime.
  const out = current.some((o) => ATIME.has(o)) ? [...current] : [...current, 'strictatime'];
  // In order, as mount(8) reads its -o list: a later option undoes an earlier one.
  for (const o of asked) {
    const undone = (x: string) => x === o || x === OPPOSITE.get(o) || (ATIME.has(o) && ATIME.has(x));
    out.splice(0, out.length, ...out.filter((x) => !undone(x)), o);
  }
  return out;
}

/** remountOptions as mount(2) flags; undefined for any option this does not map (mount(8) takes it). */
export function remountFlags(native: NativeMount, options: readonly string[]): number | undefined {
  const flags = mountFlags(native, options);
  return flags === undefined ? undefined : flags | native.MS_REMOUNT | native.MS_BIND;
}

/**
 * Mount options as mount(2) flags; undefined for any that is not one (mount(8) takes those), and for
 * a list where a later option undoes an earlier one (ro then rw), which mount(8) reads in order.
 */
export function mountFlags(native: NativeMount, options: readonly string[]): number | undefined {
  if (options.some((o) => options.includes(OPPOSITE.get(o) ?? '')) || options.filter((o) => ATIME.has(o)).length > 1) return undefined;
  const flag = new Map([
    ['ro', native.MS_RDONLY], ['nosuid', native.MS_NOSUID], ['nodev', native.MS_NODEV], ['noexec', native.MS_NOEXEC], ['noatime', native.MS_NOATIME],
    ['nodiratime', native.MS_NODIRATIME], ['relatime', native.MS_RELATIME], ['strictatime', native.MS_STRICTATIME],
    ['rw', 0], ['suid', 0], ['dev', 0], ['exec', 0], ['diratime', 0],
  ]);
  let flags = 0;
  for (const o of options) {
    const f = flag.get(o);
    if (f === undefined) return undefined;
    flags |= f;
  }
  return flags;
}

/**
 * What a bind made with its flags in one step (native/bind.c) adds to and takes off the flags of its
 * source's mount, as mount(2) flags: its clone keeps them, so only what is asked changes, as
 * remountOptions gives the same bind's remount. Undefined where mountFlags is (an option that is no
 * flag, or one undoing another), and mount(8)'s bind and remount take it.
 */
export function bindFlagChanges(native: NativeMount, options: readonly string[]): { set: number; clear: number } | undefined {
  const set = mountFlags(native, options);
  if (set === undefined) return undefined;
  // A word that is no flag of its own (rw, suid, dev, exec, diratime) takes its opposite's off.
  const clear = mountFlags(native, options.filter((o) => mountFlags(native, [o]) === 0).flatMap((o) => OPPOSITE.get(o) ?? []));
  return clear === undefined ? undefined : { set, clear };
}
