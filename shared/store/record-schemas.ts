import * as z from 'zod/mini';
import { type GroupSnapshotId, isValidId, isValidNodeName, type NodeId, type SnapshotId, type VolumeId } from '../validate.js';
import { ACCESS_SCOPES, BACKEND_KINDS, type GroupSnapshotRecord, type MountRecord, type NodeRecord, ORIGINS, type PvRecord, type SnapshotRecord, type VolumeRecord } from '../model.js';

/**
 * The shape of every record on disk, checked on read (shared/store/json-record.ts): a record from
 * another version, a hand edit, or damage is refused with the file and the field named, never trusted
 * as it is or filled with a default. Objects are strict, so a key this version does not know (a newer
 * writer's field) is an error rather than something a rewrite would silently drop.
 *
 * zod/mini rather than zod: the FlexVolume executable loads this on every call, and the mini build adds
 * about 16 KB to the bundle where zod's full build with its messages adds about 270 KB.
 */
const text = () => z.string();
// Ids are checked with the rule that made them (shared/validate.ts), so a hand-edited id that could
// name a path is refused on read like any other damage, and the parsed record carries the branded type.
const idOf = <T extends string>(valid: (value: string) => boolean, what: string) => () =>
  z.custom<T>((value) => typeof value === 'string' && valid(value), { error: `not a valid ${what}` });
const volumeId = idOf<VolumeId>(isValidId, 'volume id');
const snapshotId = idOf<SnapshotId>(isValidId, 'snapshot id');
const nodeId = idOf<NodeId>(isValidNodeName, 'node name');
const groupSnapshotId = idOf<GroupSnapshotId>(isValidId, 'group snapshot id');
const count = () => z.number().check(z.int(), z.nonnegative());
const timestamp = () => z.string();
const origin = () => z.enum(ORIGINS);
const schema = () => z.number().check(z.int(), z.positive());

const accessRequest = () =>
  z.strictObject({ scope: z.enum(ACCESS_SCOPES), raw: z.boolean(), readerOnly: z.boolean(), singleWriter: z.boolean(), fsType: z.string() });

const attachment = () =>
  z.strictObject({ node: nodeId(), readonly: z.boolean(), at: timestamp(), via: origin(), inUse: z.optional(z.boolean()), fenced: z.optional(z.boolean()), implicit: z.optional(z.boolean()) });

const volumeRecord = () =>
  z.strictObject({
    schema: schema(),
    id: volumeId(),
    name: z.optional(text()),
    backend: z.enum(BACKEND_KINDS),
    capacityBytes: count(),
    fsType: z.string(),
    access: z.enum(ACCESS_SCOPES),
    accessRequests: z.optional(z.array(accessRequest())),
    source: z.optional(text()),
    mountOptions: z.optional(z.array(text())),
    parameters: z.record(z.string(), z.string()),
    contentSource: z.optional(z.strictObject({ kind: z.enum(['snapshot', 'volume']), id: z.union([volumeId(), snapshotId()]) })),
    topology: z.optional(z.record(z.string(), z.string())),
    attachments: z.array(attachment()),
    fsResizePending: z.optional(z.boolean()),
    madeFilesystem: z.optional(z.enum(['ext4', 'xfs'])),
    fsResizeFrom: z.optional(count()),
    createdBy: origin(),
    createdAt: timestamp(),
  });

const snapshotRecord = () =>
  z.strictObject({
    schema: schema(),
    id: snapshotId(),
    name: z.optional(text()),
    sourceVolumeId: volumeId(),
    groupId: z.optional(groupSnapshotId()),
    backend: z.enum(BACKEND_KINDS),
    fsType: z.string(),
    sizeBytes: count(),
    createdAt: timestamp(),
  });

const mountRecord = () =>
  z.strictObject({
    schema: schema(),
    volumeId: volumeId(),
    path: text(),
    kind: z.enum(['stage', 'publish']),
    readonly: z.boolean(),
    block: z.optional(z.boolean()),
    stagingPath: z.optional(text()),
    implicit: z.optional(z.boolean()),
    recordOnly: z.optional(z.boolean()),
    fsGroup: z.optional(count()),
    fsGroupApplied: z.optional(count()),
    mountFlags: z.optional(z.array(text())),
    createdAt: timestamp(),
  });

const pvRecord = () =>
  z.strictObject({ schema: schema(), pvName: text(), volumeId: volumeId() });

const nodeRecord = () =>
  z.strictObject({ schema: schema(), nodeId: nodeId(), topology: z.record(z.string(), z.string()), registeredBy: origin(), registeredAt: timestamp() });

const groupSnapshotRecord = () =>
  z.strictObject({
    schema: schema(),
    id: groupSnapshotId(),
    name: z.optional(text()),
    sourceVolumeIds: z.array(volumeId()),
    members: z.array(snapshotId()),
    createdAt: timestamp(),
  });

/**
 * Takes a schema only when it parses exactly the record type T: `tsc` refuses this file when a field is
 * added to shared/model.ts and not here (or the other way round), so the two cannot drift apart.
 */
// Identical types, optional keys included (plain mutual assignability would ignore an extra optional key).
type Same<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
const exact =
  <T>() =>
  <S extends z.ZodMiniType<T>>(s: S & (Same<z.output<S>, T> extends true ? unknown : never)): S =>
    s;

/** A schema built on first use and kept. */
function once<T>(make: () => T): () => T {
  let made: T | undefined;
  return () => (made ??= make());
}

/**
 * Each schema is built on its first call and kept: building a zod schema costs far more than parsing
 * with it, and a FlexVolume call (a process of its own) reads one or two kinds of record, not all six.
 */
export const RECORD_SCHEMAS = {
  volume: once(() => exact<VolumeRecord>()(volumeRecord())),
  snapshot: once(() => exact<SnapshotRecord>()(snapshotRecord())),
  mount: once(() => exact<MountRecord>()(mountRecord())),
  pv: once(() => exact<PvRecord>()(pvRecord())),
  node: once(() => exact<NodeRecord>()(nodeRecord())),
  group: once(() => exact<GroupSnapshotRecord>()(groupSnapshotRecord())),
};

/** What is wrong with a value, one short phrase per problem, with the field's path. */
export function describeIssues(error: z.core.$ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => {
      const at = issue.path.length ? issue.path.join('.') : 'the record';
      if (issue.code === 'invalid_type') return `${at}: expected ${issue.expected}`;
      if (issue.code === 'unrecognized_keys') return `${at}: unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.slice(0, 5).join(', ')}`;
      if (issue.code === 'invalid_value') return `${at}: expected one of ${issue.values.map(String).join(', ')}`;
      if (issue.code === 'custom') return `${at}: ${issue.message}`;
      return `${at}: ${issue.code.replaceAll('_', ' ')}`;
    })
    .join('; ');
}
