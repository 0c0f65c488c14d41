import { backendFor } from '../backends/index.js';
import { alreadyExists, asTwinvolError, failedPrecondition, invalidArgument, notFound, outOfRange } from '../errors.js';
import type { AccessScope, BackendKind, ContentSource, Origin, VolumeRecord } from '../model.js';
import { BACKEND_KINDS } from '../model.js';
import { requireFilesystemFits, type SizeRange, sizeInRange } from '../size.js';
import { SCHEMA_VERSION } from '../store/json-record.js';
import { validateVolumeId, type VolumeId } from '../validate.js';
import { idForName, requireSameName } from '../names.js';
import { sameStringMap } from '../string-maps.js';
import { type AccessRequest, accessSet, filesystemAccess, requireAccess } from './access.js';
import { type Core, now } from './core.js';
import { meetsRequirement, placeVolume, type TopologyRequirement, validateRequirement } from './placement.js';
import { growsOnNode, type PopulateSource } from '../backends/backend.js';
import type { Config } from '../config.js';

export interface CreateVolumeSpec {
  id: string;
  /**
   * The name the volume was asked for by (CSI CreateVolume), when `id` is that name's id
   * (`idForName`, shared/names.ts). The record keeps it, and a repeat must give the same name.
   */
  name?: string;
  backend: string;
  /** The size asked for, in bytes (the CLI's --size, a PV's size option, CSI's required_bytes); 0: none. */
  capacityBytes: number;
  /** At most this many bytes (CSI's limit_bytes); 0 or absent: no limit. */
  limitBytes?: number;
  /**
   * The size a volume gets when none is asked (CSI's, csi/capacity.ts); absent, a volume that owns its
   * data must be asked one. A copy asked none takes its source's size where that is larger (`copySize`).
   */
  defaultBytes?: number;
  fsType?: string;
  access?: AccessScope;
  source?: string;
  mountOptions?: string[] | string;
  parameters?: Record<string, string>;
  contentSource?: ContentSource;
  createdBy: Origin;
  /**
   * How the volume will be used (CSI: one per volume capability); default a filesystem at `access`
   * scope (FlexVolume, the CLI). Kept in the record as a set and compared on a repeat.
   */
  accessRequests?: readonly AccessRequest[];
  /** Where the volume must be reachable from (CSI accessibility_requirements; shared/core/placement.ts). */
  topologyRequirement?: TopologyRequirement;
  /** A CSI inline volume's: deleted with its last mount (VolumeRecord.lifetime). */
  lifetime?: 'pod';
}

export function validateBackend(value: unknown): BackendKind {
  if (typeof value === 'string' && (BACKEND_KINDS as readonly string[]).includes(value)) return value as BackendKind;
  throw invalidArgument(`backend ${JSON.stringify(String(value).slice(0, 40))} is unknown (use ${BACKEND_KINDS.join(', ')})`);
}

/** The record a spec asks for, every field validated, before anything touches the disk. */
function recordFor(config: Config, spec: CreateVolumeSpec): VolumeRecord {
  const backend = validateBackend(spec.backend);
  const id = validateVolumeId(spec.id);
  if (spec.name !== undefined && idForName(spec.name) !== id) throw invalidArgument(`volume id ${id} is not the id of the name it was asked for by`);
  // Past 2^53 a size is still whole, and over the limit: OutOfRange from sizeInRange, not this.
  if (!Number.isInteger(spec.capacityBytes) || spec.capacityBytes < 0) throw invalidArgument('capacity must be a whole number of bytes');
  const traits = backendFor(backend);
  const capacityBytes = sizeInRange(askedOf(spec), spec.defaultBytes ?? 0, traits.sizeAlignment);
  if (traits.ownsData && capacityBytes === 0) throw invalidArgument(`a ${backend} volume needs a size`);
  const access = spec.access ?? 'single-node';
  const accessRequests = accessSet(spec.accessRequests ?? [filesystemAccess(access)]);
  const record: VolumeRecord = {
    schema: SCHEMA_VERSION,
    id,
    ...(spec.name !== undefined && spec.name !== id ? { name: spec.name } : {}),
    backend,
    capacityBytes,
    ...traits.describe(spec, config),
    access,
    accessRequests,
    parameters: spec.parameters ?? {},
    attachments: [],
    createdBy: spec.createdBy,
    createdAt: now(),
  };
  if (spec.contentSource) record.contentSource = spec.contentSource;
  if (spec.lifetime) record.lifetime = spec.lifetime;
  for (const request of accessRequests) requireAccess(record, request);
  return record;
}

function askedOf(spec: CreateVolumeSpec): SizeRange {
  return { required: spec.capacityBytes, limit: spec.limitBytes ?? 0 };
}

/**
 * The size of a new volume copied from a source of `sourceBytes`: `sized` (what `spec` asked, by
 * sizeInRange), or, where no size was required, the source's size when that is larger, within the
 * limit. CSI leaves the size of a CreateVolume without capacity_range to the plugin, and a copy
 * smaller than its source is one nothing can fill; a range that was given is honoured as given, so a
 * size below the source's stays OutOfRange (`checkSourceFits`).
 */
function copySize(spec: CreateVolumeSpec, sized: number, sourceBytes: number, alignment: number): number {
  if (spec.capacityBytes || sourceBytes <= sized) return sized;
  return sizeInRange({ required: 0, limit: spec.limitBytes ?? 0 }, sourceBytes, alignment);
}

/** Field by field, what a repeated create asks for differently from what exists. */
function differences(existing: VolumeRecord, wanted: VolumeRecord, spec: CreateVolumeSpec): string[] {
  const diff: string[] = [];
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  if (existing.backend !== wanted.backend) diff.push(`backend ${existing.backend}`);
  // In the backend's units, as `wanted` is: a block volume made before sizes were rounded (8a8caf4)
  // with 1048577 bytes is the volume a repeated create of 1048577 bytes asks for.
  const { sizeAlignment } = backendFor(existing.backend);
  const existingSize = sizeInRange({ required: existing.capacityBytes, limit: 0 }, 0, sizeAlignment);
  // A copy asked no size may have taken its source's (`copySize`). A repeat does not read the source
  // again (it may be gone by now): any size that rule can give, the default up to the limit, matches.
  const wantedSize = wanted.contentSource ? copySize(spec, wanted.capacityBytes, existingSize, sizeAlignment) : wanted.capacityBytes;
  if (existingSize !== wantedSize) diff.push(`size ${existing.capacityBytes} bytes`);
  if (existing.fsType !== wanted.fsType) diff.push(`fsType ${existing.fsType || '(none)'}`);
  // Modes of the same scope are told apart by the requests, which a record from before they were kept
  // does not have: it compares by scope alone, as twinvol did when it wrote that record.
  if (existing.access !== wanted.access) diff.push(`access ${existing.access}`);
  else if (existing.accessRequests && !same(accessSet(existing.accessRequests), wanted.accessRequests ?? [])) diff.push('access modes');
  if (existing.source !== wanted.source) diff.push('source');
  if (!same(existing.mountOptions ?? [], wanted.mountOptions ?? [])) diff.push('mountOptions');
  if (!sameStringMap(existing.parameters, wanted.parameters)) diff.push('parameters');
  if (!same(existing.contentSource ?? null, wanted.contentSource ?? null)) diff.push('content source');
  // Not the lifetime: an inline volume of twinvol's own, recorded before the mark (schema 6), is told
  // apart by its parameters (csi/ephemeral.ts), and its repeated NodePublish must still find it the same.
  return diff;
}

export interface CreateResult {
  volume: VolumeRecord;
  created: boolean;
}

/**
 * Creates a volume, or returns the existing one when the same id is asked for with the same spec
 * (every caller retries). A different spec under an existing id is AlreadyExists, naming what differs.
 */
/**
 * Every check createVolume makes of a new volume's spec that needs no disk, for a front end that must
 * refuse a bad command before it opens anything (flex/cli.ts): the same rules, in one place.
 */
export function checkVolumeSpec(config: Config, spec: CreateVolumeSpec): void {
  requireNewFits(recordFor(config, spec));
}

/**
 * A new blank filesystem is refused up front with mkfs's reason rather than from deep inside the first
 * stage (shared/size.ts); a copy holds its source's filesystem.
 */
function requireNewFits(wanted: VolumeRecord): void {
  if (backendFor(wanted.backend).makesFilesystem && wanted.fsType && !wanted.contentSource) requireFilesystemFits(wanted.fsType, wanted.capacityBytes);
}

/** `progress` hears the steps of making a new volume's data (BackendContext.progress). */
export async function createVolume(core: Core, spec: CreateVolumeSpec, progress?: (step: string) => void): Promise<CreateResult> {
  const wanted = recordFor(core.config, spec);
  const requirement = spec.topologyRequirement && validateRequirement(spec.topologyRequirement);
  return core.catalog.lock('volume', wanted.id, async () => {
    const existing = await core.catalog.getVolume(wanted.id);
    if (existing) {
      if (spec.name !== undefined) requireSameName('volume', existing, spec.name);
      const diff = differences(existing, wanted, spec);
      if (diff.length) throw alreadyExists(`volume ${wanted.id} already exists with another spec (${diff.join(', ')})`);
      if (!meetsRequirement(existing.topology, requirement))
        throw alreadyExists(`volume ${wanted.id} already exists, and is not reachable from any of the requisite topologies`);
      return { volume: existing, created: false };
    }
    // A repeat is answered above, whatever size rules came since it was made.
    requireNewFits(wanted);
    const topology = placeVolume(core, requirement);
    if (topology) wanted.topology = topology;
    const from = await populateSource(core, wanted, spec);
    const ctx = progress ? { ...core, progress } : core;
    await core.catalog.createEntry('volumes', wanted, (workDir) => backendFor(wanted.backend).populate(workDir, wanted, ctx, from));
    return { volume: wanted, created: true };
  });
}

/**
 * A volume whose description comes with every call that uses it (an exec volume's static PV: the CO
 * sends the PV's attributes with each stage and publish, and kubelet reads a FlexVolume PV afresh on
 * every call): made if new, answered as it is if the same. Another description (a PV deleted and made
 * again under the same handle, or a first call's typo) replaces the recorded one while nothing holds
 * the volume: no attachment on any node, no mount record on this node. While something does, the
 * mounts in place were made from the recorded one, and FailedPrecondition names what differs.
 */
export async function describeVolume(core: Core, spec: CreateVolumeSpec, known?: VolumeRecord): Promise<VolumeRecord> {
  const wanted = recordFor(core.config, spec);
  // `known`: the record as the caller has just read it. The same description, the common case (a CO
  // sends a volume's context with every call), writes nothing, so it takes no lock and no second read.
  const seen = known ?? (await core.catalog.getVolume(wanted.id));
  if (!seen) return (await createVolume(core, spec)).volume;
  if (seen.backend === wanted.backend && !describedOtherwise(seen, wanted).length) return seen;
  return core.catalog.lock('volume', wanted.id, async () => {
    const existing = await core.catalog.requireVolume(wanted.id);
    if (existing.backend !== wanted.backend) throw alreadyExists(`volume ${wanted.id} already exists as a ${existing.backend} volume`);
    const diff = describedOtherwise(existing, wanted);
    if (!diff.length) return existing;
    const held = [...existing.attachments.map((a) => `attached to node ${a.node}`), ...(await core.nodeState.listForVolume(existing.id)).map((r) => `${r.kind === 'stage' ? 'staged' : 'published'} at ${r.path}`)];
    if (held.length)
      throw failedPrecondition(`volume ${wanted.id} is in use (${held.slice(0, 3).join('; ')}${held.length > 3 ? '; ...' : ''}) as it was described before, and this call describes it otherwise (${diff.join(', ')}): unpublish and unstage it first`);
    // Written whole as now described, at this version: the lifetime mark is a version 7 key.
    const next: VolumeRecord = { ...existing, schema: wanted.schema, fsType: wanted.fsType, parameters: wanted.parameters };
    if (wanted.lifetime) next.lifetime = wanted.lifetime;
    else delete next.lifetime;
    await core.catalog.updateVolumeUnlocked(next);
    return next;
  });
}

/** What a description changes of a record: its fsType, its lifetime, and its parameters by key. */
function describedOtherwise(existing: VolumeRecord, wanted: VolumeRecord): string[] {
  return [
    ...(existing.fsType !== wanted.fsType ? [`fsType ${existing.fsType || '(none)'}`] : []),
    ...(existing.lifetime !== wanted.lifetime ? [lifetimeOf(existing)] : []),
    ...changedKeys(existing.parameters, wanted.parameters),
  ];
}

/** A record's lifetime as a difference names it: what the record says now. */
function lifetimeOf(volume: VolumeRecord): string {
  return volume.lifetime === 'pod' ? 'lifetime: an inline volume' : 'lifetime: not an inline volume';
}

/** The keys whose values differ, each said to be added, removed or changed; not the values, which may be secret. */
function changedKeys(before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): string[] {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return keys.filter((k) => before[k] !== after[k]).map((k) => `${k} ${!(k in before) ? 'added' : !(k in after) ? 'removed' : 'changed'}`);
}

/** The source of a new copy `volume` (its size set here, by `copySize`), checked against it. */
async function populateSource(core: Core, volume: VolumeRecord, spec: CreateVolumeSpec): Promise<PopulateSource | undefined> {
  const src = volume.contentSource;
  if (!src) return undefined;
  const sizeFrom = (sourceBytes: number) => (volume.capacityBytes = copySize(spec, volume.capacityBytes, sourceBytes, backendFor(volume.backend).sizeAlignment));
  if (src.kind === 'snapshot') {
    const snap = await core.catalog.getSnapshot(src.id);
    if (!snap) throw notFound(`snapshot ${src.id} does not exist`);
    sizeFrom(snap.sizeBytes);
    checkSourceFits(volume, snap.backend, snap.sizeBytes, snap.fsType, `snapshot ${src.id}`);
    // Always: a snapshot cut while its volume's growth was still pending on the nodes holds an image
    // larger than its filesystem, and its record cannot say so. Growing one already full is a no-op.
    volume.fsResizePending = backendFor(volume.backend).expandsOnNode;
    return { backend: snap.backend, dir: core.catalog.snapshotDir(src.id), sizeBytes: snap.sizeBytes };
  }
  const vol = await core.catalog.getVolume(src.id);
  if (!vol) throw notFound(`source volume ${src.id} does not exist`);
  sizeFrom(vol.capacityBytes);
  checkSourceFits(volume, vol.backend, vol.capacityBytes, vol.fsType, `volume ${src.id}`);
  // A source grown by the controller and not yet on a node has a filesystem smaller than its image.
  if (vol.capacityBytes < volume.capacityBytes || vol.fsResizePending) volume.fsResizePending = backendFor(volume.backend).expandsOnNode;
  return { backend: vol.backend, dir: core.catalog.volumeDir(src.id), sizeBytes: vol.capacityBytes };
}

function checkSourceFits(volume: VolumeRecord, backend: BackendKind, size: number, fsType: string, what: string): void {
  if (backend !== volume.backend) throw invalidArgument(`${what} is a ${backend} volume; it cannot fill a ${volume.backend} volume`);
  const { makesFilesystem } = backendFor(volume.backend);
  if (makesFilesystem && size > volume.capacityBytes)
    throw outOfRange(`${what} holds ${size} bytes, more than the ${volume.capacityBytes} bytes requested`);
  if (makesFilesystem && fsType !== volume.fsType)
    throw invalidArgument(`${what} holds ${fsType}, not the ${volume.fsType} requested`);
}

/**
 * Deletes a volume and its data. An unknown id is already deleted (false: there was nothing to
 * delete; delete is retried); a volume still attached anywhere, or still a loop device on this node,
 * is refused rather than pulled from under a user.
 */
export async function deleteVolume(core: Core, id: VolumeId): Promise<boolean> {
  validateVolumeId(id);
  return core.catalog.lock('volume', id, async () => {
    const volume = await core.catalog.getVolume(id);
    // What a killed create of it left (a whole sparse image, maybe) goes too, as `twinvol status` says.
    if (!volume) return (await core.catalog.sweepEntry('volumes', id), false);
    if (volume.attachments.length)
      throw failedPrecondition(`volume ${id} is still attached to ${volume.attachments.map((a) => `node ${a.node}`).join(', ')}`);
    // Any device: a read-only one (a raw block reader's) holds the image as surely as a stage's.
    const devices = backendFor(volume.backend).boundDevices(volume, core);
    if (devices.length) throw failedPrecondition(`volume ${id} is still in use on this node as ${devices.join(', ')}`);
    await core.catalog.removeEntry('volumes', id);
    return true;
  });
}

export interface ExpandResult {
  capacityBytes: number;
  /** The backend grows a filesystem on the node too: the same answer on every repeat of the call. */
  nodeExpansionRequired: boolean;
}

/**
 * Grows a volume's backing storage to `requested` bytes in the backend's units, never above `limit`
 * (0: none; CSI's capacity_range.limit_bytes). Asking for the current size or less is a no-op: never
 * shrink.
 */
export async function expandVolume(core: Core, id: VolumeId, requested: number, limit = 0): Promise<ExpandResult> {
  validateVolumeId(id);
  // Over 1 PiB is OutOfRange (sizeInRange), as CSI wants of a size the plugin cannot make.
  if (!Number.isSafeInteger(requested) || requested <= 0) throw invalidArgument(`new size ${requested} must be a positive whole number of bytes`);
  return core.catalog.lock('volume', id, async () => {
    const volume = await core.catalog.requireVolume(id);
    const backend = backendFor(volume.backend);
    const newSize = sizeInRange({ required: requested, limit }, 0, backend.sizeAlignment);
    const onNode = await growsOnNode(backend, volume, core);
    if (newSize <= volume.capacityBytes) return { capacityBytes: volume.capacityBytes, nodeExpansionRequired: onNode };
    await backend.expand(volume, newSize, core);
    // The node's half starts from the size its filesystem still has: that of the first pending growth.
    const fsResizeFrom = onNode ? (volume.fsResizePending ? (volume.fsResizeFrom ?? volume.capacityBytes) : volume.capacityBytes) : undefined;
    const next = { ...volume, capacityBytes: newSize, fsResizePending: onNode || undefined, fsResizeFrom };
    await core.catalog.updateVolumeUnlocked(next);
    return { capacityBytes: newSize, nodeExpansionRequired: onNode };
  });
}

/** The catalog's volumes, and each record that could not be read, with why. */
export interface VolumeListing {
  volumes: VolumeRecord[];
  unreadable: { id: string; reason: string }[];
}

/**
 * Every volume whose record reads; one damaged record does not hide the others (`twinvol volume
 * list` shows them, and names each one it could not read, as `twinvol status` does).
 */
export async function listVolumes(core: Core): Promise<VolumeListing> {
  const listing: VolumeListing = { volumes: [], unreadable: [] };
  for (const id of await core.catalog.listVolumeIds()) {
    try {
      const v = await core.catalog.getVolume(id);
      if (v) listing.volumes.push(v);
    } catch (err) {
      listing.unreadable.push({ id, reason: asTwinvolError(err).message });
    }
  }
  return listing;
}
