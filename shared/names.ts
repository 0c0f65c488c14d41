import { alreadyExists, invalidArgument } from './errors.js';
import { type GroupSnapshotId, isValidId, MAX_ID_BYTES, type SnapshotId, validateGroupSnapshotId, validateSnapshotId, validateVolumeId, type VolumeId } from './validate.js';
import { sha256Hex } from './sha256.js';

/**
 * The ids of volumes and snapshots that a caller names (CSI CreateVolume, CreateSnapshot). The spec
 * allows any Unicode name of up to 128 bytes without control characters, and ids become file names
 * (shared/validate.ts keeps them to a safe charset). A name that is a valid id is the id, as before;
 * any other name gets a derived id: a readable prefix of the name and a hash of the whole of it,
 * joined by `__`. Derived ids end in `__` and 32 hex digits, and a name of that form is always derived
 * too (never taken as it is), so no name can land on another name's derived id. The record also keeps
 * the name (`name` in shared/model.ts) and a create compares it, so even a hash collision, or an id
 * made by hand, is AlreadyExists rather than someone else's volume.
 */
const DERIVED_SUFFIX = /__[0-9a-f]{32}$/;
const PREFIX_BYTES = 64;

/** A name as the CSI spec allows it, or InvalidArgument naming the rule it breaks. */
export function validateName(value: unknown, what: string): string {
  if (typeof value !== 'string' || value === '') throw invalidArgument(`${what} is required`);
  if (Buffer.byteLength(value) > MAX_ID_BYTES) throw invalidArgument(`${what} is longer than ${MAX_ID_BYTES} bytes`);
  if (/\p{Cc}/u.test(value)) throw invalidArgument(`${what} must not contain control characters`);
  // A lone surrogate has no UTF-8 form: two such names would hash alike.
  if (/\p{Cs}/u.test(value)) throw invalidArgument(`${what} is not well-formed Unicode`);
  return value;
}

/** The id a name stands for: the same on every call, so a repeated create finds what the first made. */
export function idForName(name: unknown, what = 'name'): string {
  const checked = validateName(name, what);
  if (isValidId(checked) && !DERIVED_SUFFIX.test(checked)) return checked;
  const hash = sha256Hex(checked).slice(0, 32);
  return `${readablePrefix(checked)}__${hash}`;
}

/** The volume id a CreateVolume name stands for (derived ids pass the id rule by construction). */
export const volumeIdForName = (name: unknown, what = 'name'): VolumeId => validateVolumeId(idForName(name, what), what);
/** The snapshot id a CreateSnapshot name stands for. */
export const snapshotIdForName = (name: unknown, what = 'name'): SnapshotId => validateSnapshotId(idForName(name, what), what);

/** The group snapshot id a CreateVolumeGroupSnapshot name stands for. */
export const groupSnapshotIdForName = (name: unknown, what = 'name'): GroupSnapshotId => validateGroupSnapshotId(idForName(name, what), what);

/** idForName for a log line or an in-flight key: never throws (the call itself reports a bad name). */
export function idForNameOrUndefined(name: unknown): string | undefined {
  try {
    return idForName(name);
  } catch {
    return undefined;
  }
}

/**
 * A create by name finds the entry its name stands for, not one that merely has the same id (a hash
 * collision, or an id someone chose by hand): that is AlreadyExists.
 */
export function requireSameName(kind: 'volume' | 'snapshot' | 'group snapshot', existing: { id: string; name?: string }, name: string): void {
  if ((existing.name ?? existing.id) !== name) throw alreadyExists(`${kind} id ${existing.id} already belongs to a ${kind} of another name`);
}

/** The name's safe characters, others as "-", no "..", starting with a letter or digit; "name" if none is left. */
function readablePrefix(name: string): string {
  const safe = name
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/\.{2,}/g, '.')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, PREFIX_BYTES);
  return safe || 'name';
}
