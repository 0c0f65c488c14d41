import { posix } from 'node:path';
import { invalidArgument } from './errors.js';
import { redactOptionValues } from './log.js';

/** Ids become file names, so the charset is the safe subset that every filesystem and tool accepts. */
const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
export const MAX_ID_BYTES = 128;

/**
 * A caller's string as a message quotes it: shortened, in JSON quotes with every control character
 * escaped, so a key or value holding a newline cannot forge a second line in a reply or a log.
 */
export function quoted(value: string, max = 40): string {
  const shown = value.length > max ? `${value.slice(0, max)}...` : value;
  return JSON.stringify(shown.replace(/\0/g, '\\0'));
}

/** Why `value` is not a valid name of this kind, or undefined when it is. */
function whyInvalid(value: string, what: string, maxBytes: number): string | undefined {
  if (value === '') return `${what} is required`;
  if (value.includes('\0')) return `${what} ${quoted(value)} contains a NUL byte`;
  if (Buffer.byteLength(value) > maxBytes) return `${what} is longer than ${maxBytes} bytes`;
  if (value.includes('..') || value.includes('/')) return `${what} ${quoted(value)} must not contain ".." or "/"`;
  if (!ID_PATTERN.test(value)) return `${what} ${quoted(value)} may only hold letters, digits, ".", "_" and "-", starting with a letter or digit`;
  return undefined;
}

function checkName(value: unknown, what: string, maxBytes: number): string {
  if (typeof value !== 'string') throw invalidArgument(`${what} is required`);
  const why = whyInvalid(value, what, maxBytes);
  if (why !== undefined) throw invalidArgument(why);
  return value;
}

/**
 * Ids that passed their check, as types of their own: a path, a PV name or an unchecked string cannot
 * be handed to a verb where a volume id is expected, and one kind of id cannot stand in for another.
 * The brand exists only at compile time; on disk and on the wire an id is a plain string.
 */
declare const brand: unique symbol;
type Branded<T extends string> = string & { readonly [brand]: T };
export type VolumeId = Branded<'VolumeId'>;
export type SnapshotId = Branded<'SnapshotId'>;
/** A Kubernetes node name, which is also the CSI node id. */
export type NodeId = Branded<'NodeId'>;
/** A CSI VolumeGroupSnapshot: the snapshots of several volumes cut at one point in time. */
export type GroupSnapshotId = Branded<'GroupSnapshotId'>;

export const validateVolumeId = (value: unknown, what = 'volume id') => checkName(value, what, MAX_ID_BYTES) as VolumeId;
/** Whether a string is a valid volume or snapshot id (the two share one rule), without throwing. */
export const isValidId = (value: string): boolean => whyInvalid(value, 'id', MAX_ID_BYTES) === undefined;
export const validateSnapshotId = (value: unknown, what = 'snapshot id') => checkName(value, what, MAX_ID_BYTES) as SnapshotId;
export const validateGroupSnapshotId = (value: unknown, what = 'group snapshot id') => checkName(value, what, MAX_ID_BYTES) as GroupSnapshotId;
/** Kubernetes object names (PVs, nodes) are DNS subdomains of up to 253 characters. */
export const validateNodeName = (value: unknown, what = 'node name') => checkName(value, what, 253) as NodeId;
export const isValidNodeName = (value: string): boolean => whyInvalid(value, 'node name', 253) === undefined;
export const isValidPvName = (value: string): boolean => whyInvalid(value, 'PV name', 253) === undefined;
export const validatePvName = (value: unknown, what = 'PV name') => checkName(value, what, 253);

/**
 * An absolute, normalised path strictly below `root`. Normalisation is checked rather than applied:
 * "a/../b" is refused, not rewritten, because a caller that sends it is confused or hostile. Symlinks
 * inside the root are checked separately by `assertNoSymlinkEscape`, which needs the filesystem.
 */
export function validatePathUnder(value: unknown, root: string, what: string): string {
  if (typeof value !== 'string' || value === '') throw invalidArgument(`${what} is required`);
  if (value.includes('\0')) throw invalidArgument(`${what} contains a NUL byte`);
  // PATH_MAX, 4096, counts the terminating NUL: a path of 4096 bytes failed ENAMETOOLONG inside a verb, INTERNAL on every retry.
  if (Buffer.byteLength(value) >= 4096) throw invalidArgument(`${what} is longer than 4095 bytes`);
  // Options JSON where a path belongs (arguments out of order) may hold the pod's secrets: never quoted.
  if (value.trimStart().startsWith('{')) throw invalidArgument(`${what} is a JSON object, not a path: are the arguments out of order?`);
  if (!posix.isAbsolute(value)) throw invalidArgument(`${what} ${quoted(value)} must be an absolute path`);
  // Past NAME_MAX the kernel answers ENAMETOOLONG deep inside a verb, as if twinvol were at fault.
  if (value.split('/').some((part) => Buffer.byteLength(part) > 255)) throw invalidArgument(`${what} ${quoted(value)} has a component longer than 255 bytes`);
  const trimmed = value.length > 1 ? value.replace(/\/+$/, '') : value;
  if (posix.normalize(trimmed) !== trimmed || trimmed.split('/').includes('..'))
    throw invalidArgument(`${what} ${quoted(value)} is not a normalised path`);
  const base = root.replace(/\/+$/, '');
  if (!trimmed.startsWith(`${base}/`)) throw invalidArgument(`${what} ${quoted(value)} is outside ${base}`);
  return trimmed;
}

/**
 * The longest deadline a Node timer holds: a longer delay fires after 1 ms (with a warning), so a
 * timeout of 3,000,000,000 ms killed every tool and driver at once.
 */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A deadline in whole milliseconds, from `min` to MAX_TIMEOUT_MS (a JSON setting: a number, never a string). */
export function validateTimeoutMs(value: unknown, min: number, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_TIMEOUT_MS)
    throw invalidArgument(`${what} must be a whole number of milliseconds from ${min} to ${MAX_TIMEOUT_MS}`);
  return value;
}

export type FsType = 'ext4' | 'xfs';
export const BLOCK_FS_TYPES: readonly FsType[] = ['ext4', 'xfs'];

export function validateBlockFsType(value: unknown, fallback: FsType): FsType {
  if (value === undefined || value === '') return fallback;
  if (typeof value === 'string' && (BLOCK_FS_TYPES as readonly string[]).includes(value)) return value as FsType;
  throw invalidArgument(`fsType ${quoted(String(value))} is not supported for block volumes (use ext4 or xfs)`);
}

/** A filesystem type for static mounts: one word, as /proc/filesystems spells them. */
export function validateStaticFsType(value: unknown): string {
  // Said as missing, as a missing source is: not as the type "undefined" (`volume create --backend static` without --fs-type).
  if (value === undefined || value === '') throw invalidArgument('fsType is required for static volumes: the filesystem type of the source (nfs, tmpfs, ext4, ...)');
  if (typeof value !== 'string' || !/^[a-z0-9][a-z0-9._-]{0,31}$/.test(value))
    throw invalidArgument(`fsType ${quoted(String(value))} is not a filesystem type name`);
  return value;
}

/**
 * Mount options travel as one comma-joined argv element after "-o", so an option can never become a
 * flag of mount(8); the charset still keeps out quotes, spaces and commas inside one option.
 */
export function validateMountOptions(value: unknown, what = 'mountOptions'): string[] {
  if (value === undefined || value === '') return [];
  const list = typeof value === 'string' ? value.split(',') : value;
  if (!Array.isArray(list)) throw invalidArgument(`${what} must be a comma-separated string or a list of strings`);
  return list.map((opt: unknown) => {
    if (typeof opt !== 'string' || !/^[A-Za-z0-9_][A-Za-z0-9_.=:+/@-]{0,255}$/.test(opt) || opt.includes('..'))
      // Quoted less a secret value: a CIFS password often holds the very characters refused here.
      throw invalidArgument(`${what}: mount option ${quoted(typeof opt === 'string' ? redactOptionValues(opt) : String(opt))} is not allowed`);
    return opt;
  });
}

/** A static source: an absolute path (device, image or directory), a pseudo source such as "tmpfs", or host:/export. */
export function validateStaticSource(value: unknown): string {
  if (typeof value !== 'string' || value === '') throw invalidArgument('source is required for static volumes');
  if (value.includes('\0') || value.split('/').includes('..') || Buffer.byteLength(value) > 1024)
    throw invalidArgument(`source ${quoted(value)} is not a valid mount source`);
  if (!/^(\/[^,\s]*|[a-z][a-z0-9_-]{0,31}|[A-Za-z0-9.-]+:\/[^,\s]*)$/.test(value))
    throw invalidArgument(`source ${quoted(value)} must be an absolute path, a pseudo source such as "tmpfs", or host:/path`);
  return value;
}

/** A string-to-string map (FlexVolume options, CSI parameters and contexts) with protocol-sized limits. */
export function validateStringMap(value: unknown, what: string, maxBytes = 64 * 1024): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidArgument(`${what} must be a JSON object`);
  let total = 0;
  const entries: [string, string][] = [];
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw invalidArgument(`${what}: value of ${quoted(k)} must be a string`);
    total += Buffer.byteLength(k) + Buffer.byteLength(v);
    entries.push([k, v]);
  }
  if (total > maxBytes) throw invalidArgument(`${what} is larger than ${maxBytes} bytes`);
  // Object.fromEntries defines every key as an own property; `out[k] = v` would run the __proto__
  // setter for that key and drop it unseen, past the unknown-key checks of flex/options.ts and
  // csi/parameters.ts.
  return Object.fromEntries(entries);
}

export function parseBoolean(value: string | undefined, what: string, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw invalidArgument(`${what} must be "true" or "false"`);
}

export function parseGid(value: string | undefined, what: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (!/^[0-9]{1,10}$/.test(value) || Number(value) > 0xfffffffe) throw invalidArgument(`${what} must be a group id`);
  return Number(value);
}

/**
 * Limits on what a request may carry, whatever its protocol (docs in csi/README.md): a request is
 * decoded whole before any rule sees it, so a 3 MiB volume_context would otherwise reach a record, a
 * log line and a comparison. A string is at most 64 KiB; a map (or message) at most 256 keys and 64 KiB
 * of keys and string values; nesting at most 8 deep.
 */
export const REQUEST_LIMITS = { stringBytes: 64 * 1024, mapKeys: 256, mapBytes: 64 * 1024, depth: 8 } as const;

/** Refuses a decoded request (plain objects, arrays, scalars) past REQUEST_LIMITS, naming the field. */
export function checkBounds(value: unknown, what: string, depth = 0): void {
  if (typeof value === 'string') {
    if (Buffer.byteLength(value) > REQUEST_LIMITS.stringBytes) throw invalidArgument(`${what} is longer than ${REQUEST_LIMITS.stringBytes} bytes`);
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  if (depth > REQUEST_LIMITS.depth) throw invalidArgument(`${what} is nested deeper than ${REQUEST_LIMITS.depth} levels`);
  if (Buffer.isBuffer(value)) return;
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  if (entries.length > REQUEST_LIMITS.mapKeys) throw invalidArgument(`${what} has more than ${REQUEST_LIMITS.mapKeys} entries`);
  let bytes = 0;
  for (const [key, v] of entries) {
    const name = /^[\w./-]{1,64}$/.test(key) ? key : quoted(key, 64);
    checkBounds(v, what ? `${what}.${name}` : name, depth + 1);
    bytes += Buffer.byteLength(key) + (typeof v === 'string' ? Buffer.byteLength(v) : 0);
    if (bytes > REQUEST_LIMITS.mapBytes) throw invalidArgument(`${what} is larger than ${REQUEST_LIMITS.mapBytes} bytes`);
  }
}
