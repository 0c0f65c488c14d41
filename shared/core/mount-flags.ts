import type { Backend } from '../backends/backend.js';
import { invalidArgument } from '../errors.js';
import type { MountRecord } from '../model.js';
import { heldToReading } from '../mount-options.js';

/**
 * The flags a bind mount can take. A bind has no filesystem of its own: its flags are those of the
 * mount point itself (set with the bind in one step, or by `mount -o remount,bind,...`:
 * shared/mounter.ts), the only ones the kernel honours there. Anything else (discard, data=..., nouuid, sync) belongs
 * to the filesystem, which is mounted once, at stage, and would be dropped without a word.
 */
const BIND_FLAGS: ReadonlySet<string> = new Set([
  'ro', 'rw', 'nosuid', 'suid', 'nodev', 'dev', 'noexec', 'exec',
  'noatime', 'atime', 'nodiratime', 'diratime', 'relatime', 'norelatime', 'strictatime', 'nostrictatime',
]);

/**
 * Words that mount(8) takes in -o but that are operations, not a filesystem's options: a bind, a
 * remount, a move, a loop device, a propagation change, util-linux's own X-mount.* actions. In a
 * CO's mount_flags they reached mount(8) and failed as INTERNAL with its words, or on a dir volume
 * were recorded and ignored; twinvol does each of these itself where it means to.
 */
const OPERATIONS = /^(bind|rbind|remount|move|loop|offset=.*|sizelimit=.*|(r?(shared|slave|private|unbindable))|make-r?(shared|slave|private|unbindable)|x-mount\..*)$/i;

/** Mount flags a CO sends (CSI mount_flags), refused whole if any is an operation of mount(8). */
export function requireMountFlagsOptions(flags: readonly string[], what: string): string[] {
  const operation = flags.find((flag) => OPERATIONS.test(flag));
  if (operation !== undefined) throw invalidArgument(`${what}: ${operation} is an operation of mount(8), not a mount option: twinvol does not take it from a request`);
  return [...flags];
}

/**
 * The flags of a publish that its bind must apply. A filesystem flag is accepted only when the staging
 * it is bound from was made with it (kubelet sends the same mount_flags to stage and publish), since
 * it is in effect there already; otherwise it is InvalidArgument, as is rw on a read-only publish.
 */
export function bindFlagsFor(flags: readonly string[], stagedWith: readonly string[] = [], readonly: boolean): string[] {
  for (const flag of flags) {
    if (flag === 'rw' && readonly) throw invalidArgument('mount flag rw cannot be applied to a read-only publish');
    if (!BIND_FLAGS.has(flag) && !stagedWith.includes(flag))
      throw invalidArgument(`mount flag ${flag} cannot be applied to a bind mount: it belongs to the filesystem, which is mounted when the volume is staged (ask for it there)`);
  }
  return bindableFlags(flags);
}

/** The flags a bind applies, of those a staging or publish was made with. */
export function bindableFlags(flags: readonly string[]): string[] {
  return flags.filter((flag) => BIND_FLAGS.has(flag));
}

/** The flags of a publish that only a staging can apply: an implicit staging made for the publish takes them. */
export function filesystemFlags(flags: readonly string[]): string[] {
  return flags.filter((flag) => !BIND_FLAGS.has(flag));
}


/** The flags the kernel's mount table shows on a mount that has them, each with the flag that undoes it. */
const SHOWN_FLAGS: ReadonlyMap<string, string> = new Map([['ro', 'rw'], ['nosuid', 'suid'], ['nodev', 'dev'], ['noexec', 'exec']]);

/**
 * Of the flags a mount was asked for (read-only, and `flags` in order: a later contrary flag undoes an earlier one), those
 * the kernel would show on it and `shown`, its options in the mount table, lacks. A bind made without
 * the addon's one-step call takes its flags with a second step, a remount (shared/mounter.ts), so a
 * process killed between the two left a bind without them, read-write where a read-only publish was
 * asked; only the table tells.
 */
export function flagsMissing(readonly: boolean, flags: readonly string[], shown: readonly string[]): string[] {
  // As the mount is made: ro first, and a CO's rw dropped from a read-only one (staging.ts mountedFlags).
  const asked = [...(readonly ? ['ro'] : []), ...heldToReading(readonly, flags)];
  return [...SHOWN_FLAGS].filter(([flag, undo]) => asked.lastIndexOf(flag) > asked.lastIndexOf(undo) && !shown.includes(flag)).map(([flag]) => flag);
}

/** Whether two calls asked for the same mount flags (in order: the last of two contrary flags wins). */
export function sameFlags(a: readonly string[] = [], b: readonly string[] = []): boolean {
  return a.length === b.length && a.every((flag, i) => flag === b[i]);
}

/**
 * The flags a mount twinvol made lacks of those its record says it was made with (flagsMissing): a
 * stage's, or a publish's with those of the staging it binds when that staging is its record alone
 * (`staging`, the record at the publish's stagingPath, if any). None where the backend makes and
 * takes down its own mounts (a driver's), which twinvol does not judge.
 */
export function flagsLeftOff(backend: Pick<Backend, 'unstage' | 'unpublish' | 'stagedDirectory'>, record: MountRecord, staging: MountRecord | undefined, shown: readonly string[]): string[] {
  if (record.kind === 'stage') return backend.unstage ? [] : flagsMissing(record.readonly, record.mountFlags ?? [], shown);
  if (backend.unpublish) return [];
  const fromStaging = backend.stagedDirectory && staging?.kind === 'stage' && staging.recordOnly && staging.path === record.stagingPath ? staging : undefined;
  const flags = [...bindableFlags(fromStaging?.mountFlags ?? []), ...bindableFlags(record.mountFlags ?? [])];
  return flagsMissing(record.readonly || Boolean(fromStaging?.readonly), flags, shown);
}
