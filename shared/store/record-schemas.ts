import * as v from 'valibot';
import { type GroupSnapshotId, isValidId, isValidNodeName, type NodeId, type SnapshotId, type VolumeId } from '../validate.js';
import { ACCESS_SCOPES, BACKEND_KINDS, type GroupSnapshotRecord, type MountRecord, type NodeRecord, ORIGINS, type PvRecord, type SnapshotRecord, type VolumeRecord } from '../model.js';

/**
 * The shape of every record on disk, checked on read (shared/store/json-record.ts): a record from
 * another version, a hand edit, or damage is refused with the file and the field named, never trusted
 * as it is or filled with a default. Objects are strict, so a key this version does not know (a newer
 * writer's field) is an error rather than something a rewrite would silently drop.
 *
 * valibot rather than zod/mini: every FlexVolume call is a process of its own that builds the schema
 * of the record it reads and parses one or two records with it. Building the volume record's schema
 * in a fresh process took 4.0-5.4 ms with zod/mini and 0.9-1.0 ms with valibot, the first parse 1.8-2.5
 * against 0.7 ms, and 10,000 parses 103 against 50-57 ms (/tmp/fm/vb, scratch, 7 runs each).
 */

/**
 * A strict object that names every key it does not know: valibot's strictObject stops at the first,
 * and a rest of `never` reports each one (describeIssues groups them). Nothing but the entries gets
 * through, so its output is the plain object's.
 */
export function strict<const E extends v.ObjectEntries>(entries: E): v.GenericSchema<unknown, v.InferOutput<v.ObjectSchema<E, undefined>>> {
  return v.objectWithRest(entries, v.never());
}

const text = () => v.string();
// Ids are checked with the rule that made them (shared/validate.ts), so a hand-edited id that could
// name a path is refused on read like any other damage, and the parsed record carries the branded type.
const idOf = <T extends string>(valid: (value: string) => boolean, what: string) => () =>
  v.custom<T>((value) => typeof value === 'string' && valid(value), `not a valid ${what}`);
const volumeId = idOf<VolumeId>(isValidId, 'volume id');
const snapshotId = idOf<SnapshotId>(isValidId, 'snapshot id');
const nodeId = idOf<NodeId>(isValidNodeName, 'node name');
const groupSnapshotId = idOf<GroupSnapshotId>(isValidId, 'group snapshot id');
const count = () => v.pipe(v.number(), v.integer('not a whole number'), v.minValue(0, 'below 0'));
const timestamp = () => v.string();
const origin = () => v.picklist(ORIGINS);
const schema = () => v.pipe(v.number(), v.integer('not a whole number'), v.minValue(1, 'below 1'));

const accessRequest = () =>
  strict({ scope: v.picklist(ACCESS_SCOPES), raw: v.boolean(), readerOnly: v.boolean(), singleWriter: v.boolean(), fsType: v.string() });

const attachment = () =>
  strict({ node: nodeId(), readonly: v.boolean(), at: timestamp(), via: origin(), inUse: v.optional(v.boolean()), fenced: v.optional(v.boolean()), implicit: v.optional(v.boolean()) });

const volumeRecord = () =>
  strict({
    schema: schema(),
    id: volumeId(),
    name: v.optional(text()),
    backend: v.picklist(BACKEND_KINDS),
    capacityBytes: count(),
    fsType: v.string(),
    access: v.picklist(ACCESS_SCOPES),
    accessRequests: v.optional(v.array(accessRequest())),
    source: v.optional(text()),
    mountOptions: v.optional(v.array(text())),
    parameters: v.record(v.string(), v.string()),
    contentSource: v.optional(strict({ kind: v.picklist(['snapshot', 'volume']), id: v.union([volumeId(), snapshotId()]) })),
    topology: v.optional(v.record(v.string(), v.string())),
    attachments: v.array(attachment()),
    fsResizePending: v.optional(v.boolean()),
    madeFilesystem: v.optional(v.picklist(['ext4', 'xfs'])),
    fsResizeFrom: v.optional(count()),
    lifetime: v.optional(v.literal('pod')),
    createdBy: origin(),
    createdAt: timestamp(),
  });

const snapshotRecord = () =>
  strict({
    schema: schema(),
    id: snapshotId(),
    name: v.optional(text()),
    sourceVolumeId: volumeId(),
    groupId: v.optional(groupSnapshotId()),
    backend: v.picklist(BACKEND_KINDS),
    fsType: v.string(),
    sizeBytes: count(),
    createdAt: timestamp(),
  });

const mountRecord = () =>
  strict({
    schema: schema(),
    volumeId: volumeId(),
    path: text(),
    kind: v.picklist(['stage', 'publish']),
    readonly: v.boolean(),
    block: v.optional(v.boolean()),
    stagingPath: v.optional(text()),
    implicit: v.optional(v.boolean()),
    recordOnly: v.optional(v.boolean()),
    fsGroup: v.optional(count()),
    fsGroupApplied: v.optional(count()),
    mountFlags: v.optional(v.array(text())),
    createdAt: timestamp(),
  });

const pvRecord = () =>
  strict({ schema: schema(), pvName: text(), volumeId: volumeId() });

const nodeRecord = () =>
  strict({ schema: schema(), nodeId: nodeId(), topology: v.record(v.string(), v.string()), registeredBy: origin(), registeredAt: timestamp() });

const groupSnapshotRecord = () =>
  strict({
    schema: schema(),
    id: groupSnapshotId(),
    name: v.optional(text()),
    sourceVolumeIds: v.array(volumeId()),
    members: v.array(snapshotId()),
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
  <S extends v.GenericSchema<unknown, T>>(s: S & (Same<v.InferOutput<S>, T> extends true ? unknown : never)): S =>
    s;

/** A schema built on first use and kept. */
function once<T>(make: () => T): () => T {
  let made: T | undefined;
  return () => (made ??= make());
}

/**
 * Each schema is built on its first call and kept: building a schema costs more than parsing with
 * it, and a FlexVolume call (a process of its own) reads one or two kinds of record, not all six.
 */
export const RECORD_SCHEMAS = {
  volume: once(() => exact<VolumeRecord>()(volumeRecord())),
  snapshot: once(() => exact<SnapshotRecord>()(snapshotRecord())),
  mount: once(() => exact<MountRecord>()(mountRecord())),
  pv: once(() => exact<PvRecord>()(pvRecord())),
  node: once(() => exact<NodeRecord>()(nodeRecord())),
  group: once(() => exact<GroupSnapshotRecord>()(groupSnapshotRecord())),
};

/**
 * What is wrong with a value, one short phrase per problem, with the field's path: "name: expected
 * string", "the record: unknown keys owner, extra", "backend: expected one of dir, block". At most five.
 */
export function describeIssues(issues: readonly v.BaseIssue<unknown>[]): string {
  const phrases: string[] = [];
  const unknownKeys = new Map<string, string[]>();
  for (const issue of issues) {
    const keys = (issue.path ?? []).map((item) => String(item.key));
    const at = (path: string[]) => (path.length ? path.join('.') : 'the record');
    if (issue.type === 'never') {
      // A key the object does not know (strict, above): one phrase per object, every key in it.
      const object = at(keys.slice(0, -1));
      if (!unknownKeys.has(object)) {
        unknownKeys.set(object, []);
        phrases.push(object);
      }
      unknownKeys.get(object)?.push(keys.at(-1) ?? '');
    } else if (issue.kind === 'validation' || issue.type === 'custom') phrases.push(`${at(keys)}: ${issue.message}`);
    else if (issue.input === undefined && issue.expected?.startsWith('"')) phrases.push(`${at(keys)}: missing`);
    else if (issue.type === 'picklist') phrases.push(`${at(keys)}: expected one of ${(issue.expected ?? '').replace(/^\(|\)$/g, '').split(' | ').map((o) => o.replace(/^"|"$/g, '')).join(', ')}`);
    else if (issue.type === 'union') phrases.push(`${at(keys)}: none of the forms it may take`);
    else phrases.push(`${at(keys)}: expected ${TYPE_NAMES[issue.type] ?? issue.type}`);
  }
  return phrases
    .slice(0, 5)
    .map((phrase) => {
      const keys = unknownKeys.get(phrase);
      return keys ? `${phrase}: unknown key${keys.length > 1 ? 's' : ''} ${keys.slice(0, 5).join(', ')}` : phrase;
    })
    .join('; ');
}

/** How a schema's type is named in a message: valibot's names for the objects twinvol's schemas use. */
const TYPE_NAMES: Record<string, string> = { object_with_rest: 'object' };
