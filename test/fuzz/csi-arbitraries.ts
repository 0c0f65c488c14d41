import fc from 'fast-check';
import { REQUEST_LIMITS } from '../../shared/validate.js';

/**
 * Generators for test/fuzz/csi-requests.test.ts: every CSI RPC's request as a valid skeleton (a call
 * that succeeds, or is an idempotent no-op, in the suite's world) with up to two fields replaced by
 * hostile values. Starting from a valid call lets a hostile field get past the checks of the others and
 * reach the deep ones (the core's path, capability and contradiction rules, shared/core/).
 * Each replacement names the field and the words of which a refusal must quote at least one.
 */

/** The world every skeleton is written against (made by the suite's beforeAll). */
export interface FuzzWorld {
  kubeletDir: string;
  /** A dir volume and a block volume, controller-published to node-a, staged, published. */
  dir: PublishedVolume;
  blk: PublishedVolume;
  snapshotId: string;
  groupId: string;
  groupSnapshotIds: string[];
  /** Paths below the kubelet dir whose parents are symlinks planted to lead out of it. */
  planted: string[];
}

export interface PublishedVolume {
  id: string;
  staging: string;
  target: string;
}

/** A request field replaced by a hostile value; `names` are the words a refusal of it may use. */
export interface Mutation {
  field: string;
  value: unknown;
  names: string[];
}

export interface FuzzCase {
  request: Record<string, unknown>;
  mutations: Mutation[];
}

/** The secret sentinel every request carries in its secrets map: it must never come back. */
export const SECRET = 'fuzz-SECRET-sentinel-7f3a';

const LONG_STRING = 'y'.repeat(REQUEST_LIMITS.stringBytes + 1);
/** U+2215 division slash, U+FF0E fullwidth full stop, U+FF0F fullwidth solidus, U+2024 one dot leader. */
export const LOOKALIKES = ['fz\u2215etc', '\uff0e\uff0e', '\uff0e\uff0e\uff0fetc', 'a\uff0fb', '\u2024\u2024', '\uff46\uff5a-dir'];

/** Ids and names: traversal, separators, NUL, 253/254-character names, look-alikes, over the string limit. */
const hostileName = fc.oneof(
  fc.constantFrom('..', '../etc', '/etc/passwd', 'a/b', 'a\0b', '', ' ', '-rf', '.hidden', 'fz-missing', 'x'.repeat(129), 'n'.repeat(253), 'n'.repeat(254), ...LOOKALIKES),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constant(LONG_STRING),
);

const hostileMap = fc.oneof(
  fc.dictionary(fc.string({ maxLength: 12 }), fc.string({ maxLength: 24 }), { maxKeys: 4 }),
  fc.constant(Object.fromEntries(Array.from({ length: REQUEST_LIMITS.mapKeys + 44 }, (_, i) => [`k${i}`, 'v']))),
  fc.constant(Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`k${i}`, 'v'.repeat(400)]))),
  fc.constant({ big: LONG_STRING }),
  fc.constant(Object.fromEntries([['__proto__', 'x'], ['constructor', 'y'], ['a\0b', 'z'], ['', 'e']])),
  fc.dictionary(fc.constantFrom('backend', 'size', 'fsType', 'access', 'source', 'mountOptions', 'volumeId', 'csi.storage.k8s.io/pvc/name', 'twinvol.io/ephemeral'), fc.oneof(hostileName, fc.constantFrom('dir', 'block', 'static', '/etc', 'ntfs', '-1', '1Pi', 'bind,rw', 'true')), { minKeys: 1, maxKeys: 3 }),
);

const modes = fc.oneof(
  fc.constantFrom('UNKNOWN', 'SINGLE_NODE_WRITER', 'SINGLE_NODE_READER_ONLY', 'MULTI_NODE_READER_ONLY', 'MULTI_NODE_SINGLE_WRITER', 'MULTI_NODE_MULTI_WRITER', 'SINGLE_NODE_SINGLE_WRITER', 'SINGLE_NODE_MULTI_WRITER'),
  fc.constant(99),
);
const mountFlag = fc.constantFrom('ro', 'rw', 'bind', 'rbind', 'remount', 'suid', 'dev', 'exec', 'loop', 'defaults,bind', 'x\0y', '../', 'context="x"', 'size=1', '');
const mountAccess = fc.record({
  fs_type: fc.constantFrom('', 'ext4', 'xfs', 'ntfs', 'tmpfs', 'proc', '../ext4', 'ext4\0'),
  mount_flags: fc.array(mountFlag, { maxLength: 3 }),
  volume_mount_group: fc.constantFrom('', '0', '1000', '-1', '4294967296', 'root', '1e3', ' 7'),
});
/** Wrong combinations as much as right ones: no access type, both, no mode, modes a backend refuses. */
const hostileCapability = fc.oneof(
  fc.record({ mount: mountAccess, access_mode: fc.record({ mode: modes }) }),
  fc.record({ block: fc.constant({}), access_mode: fc.record({ mode: modes }) }),
  fc.record({ mount: mountAccess, block: fc.constant({}), access_mode: fc.record({ mode: modes }) }),
  fc.constantFrom<Record<string, unknown>>({}, { access_mode: { mode: 'SINGLE_NODE_WRITER' } }, { mount: {} }, { block: {} }),
);
const CAP_NAMES = ['volume_capabilit', 'access', 'mode', 'writer', 'reader', 'mount', 'block', 'fs_type', 'filesystem', 'flag', 'volume_mount_group', 'group'];

const int64 = fc.oneof(
  fc.constantFrom('-1', '0', '1', '4095', '9223372036854775807', '-9223372036854775808', String(2 ** 50), String(2 ** 50 + 1), String(2 ** 44), String(2 ** 45)),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String),
);
const hostileRange = fc.record({ required_bytes: int64, limit_bytes: int64 });
const RANGE_NAMES = ['capacity_range', 'bytes', 'size', 'PiB', 'limit'];

/** Paths: relative, outside, not normalised, NUL, look-alikes, too long, and through planted symlinks. */
function hostilePath(w: FuzzWorld): fc.Arbitrary<string> {
  const k = w.kubeletDir;
  return fc.oneof(
    fc.constantFrom(
      'relative/mount', '/', '/etc', '/tmp', k, `${k}/`, `${k}/../escape`, `${k}/pods/../../etc`, `${k}/pods/a\0b`, `${k}//pods//x`,
      `${k}/pods/./x`, `${k}/pods/\u2215etc`, `${k}/pods/\uff0e\uff0e/etc`, `${k}/pods/\uff0e\uff0e\uff0fetc`, `${k}/${'p'.repeat(300)}`,
      `${k}/${'a/'.repeat(2100)}`, `${k}/pods/${LONG_STRING}`, w.dir.target, w.blk.target, w.dir.staging, w.blk.staging,
    ),
    fc.constantFrom(...w.planted),
    fc.string({ maxLength: 24 }).map((s) => `${k}/pods/${s}`),
  );
}

type Field = (w: FuzzWorld) => fc.Arbitrary<Mutation>;
const field = (name: string, value: (w: FuzzWorld) => fc.Arbitrary<unknown>, names: string[] = []): Field => (w) =>
  value(w).map((v) => ({ field: name, value: v, names: [name, ...names, ...leaves(v)] }));

/** The short strings inside a value (keys and leaves): a refusal may quote the one that was wrong. */
function leaves(v: unknown): string[] {
  if (typeof v === 'string') return v.length >= 2 && v.length <= 40 ? [v] : [];
  if (typeof v !== 'object' || v === null) return [];
  return Object.entries(v).flatMap(([k, x]) => [...leaves(k), ...leaves(x)]);
}
/**
 * An id field. Besides the field's name, a refusal may name what the id identifies followed by the
 * id itself ("snapshot O does not exist" for snapshot_id "O"), however short the id: leaves() leaves
 * out one-character values, which would match almost any message on their own.
 */
const id = (name: string, extra: string[] = []): Field => (w) =>
  field(name, () => hostileName, extra)(w).map((m) => ({ ...m, names: [...m.names, `${name.replace(/_id$/, '').replaceAll('_', ' ')} ${String(m.value)}`] }));
/**
 * A create's name: a name an earlier run created with another spec is ALREADY_EXISTS, and the message
 * names the id the name stands for (shared/names.ts), which need not quote the name itself.
 */
const createName = field('name', () => hostileName, ['already exists']);
const PATH_NAMES = ['path', 'kubelet', 'symlink', 'link', 'staged', 'published'];
const path = (name: string) => field(name, hostilePath, PATH_NAMES);
const map = (name: string, names: string[] = []) => field(name, () => hostileMap, names);
const cap = field('volume_capability', () => hostileCapability, CAP_NAMES);
const caps = field('volume_capabilities', () => fc.array(hostileCapability, { maxLength: 3 }), CAP_NAMES);
const range = field('capacity_range', () => fc.oneof(hostileRange, fc.constant(null)), RANGE_NAMES);
const secrets = field('secrets', () => hostileMap.map((m) => ({ ...m, token: SECRET })));
const readonly = field('readonly', () => fc.boolean(), ['read', 'writ', 'access']);
const paging = [field('max_entries', () => fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })), field('starting_token', () => hostileName, ['token'])];
const contentSource = field('volume_content_source', () => fc.oneof(
  hostileName.map((v) => ({ snapshot: { snapshot_id: v } })),
  hostileName.map((v) => ({ volume: { volume_id: v } })),
  fc.constant({}),
), ['snapshot', 'volume', 'source']);
const topology = field('accessibility_requirements', () => fc.record({
  requisite: fc.array(hostileMap.map((segments) => ({ segments })), { maxLength: 2 }),
  preferred: fc.array(hostileMap.map((segments) => ({ segments })), { maxLength: 2 }),
}), ['topolog', 'segment', 'accessib']);

interface Spec {
  skeleton: (w: FuzzWorld) => Record<string, unknown>;
  fields: Field[];
}

const mountCap = (mode = 'MULTI_NODE_MULTI_WRITER') => ({ mount: { fs_type: '', mount_flags: [], volume_mount_group: '' }, access_mode: { mode } });
const blockVolumeCap = { mount: { fs_type: 'ext4', mount_flags: [], volume_mount_group: '' }, access_mode: { mode: 'SINGLE_NODE_WRITER' } };
const sec = { secrets: { token: SECRET } };
const none: Spec = { skeleton: () => ({}), fields: [] };

/**
 * One entry per RPC. Skeletons of calls that remove something point at what does not exist (so they are
 * idempotent no-ops), and hostile values never name the world's own volumes there: the world must stay
 * as it is for the next run.
 */
export const SPECS: Record<string, Spec> = {
  GetPluginInfo: none,
  GetPluginCapabilities: none,
  Probe: none,
  ControllerGetCapabilities: none,
  NodeGetCapabilities: none,
  NodeGetInfo: none,
  GroupControllerGetCapabilities: none,
  CreateVolume: {
    skeleton: (w) => ({ name: w.dir.id, capacity_range: { required_bytes: String(64 * 2 ** 20), limit_bytes: '0' }, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, ...sec }),
    // Parameters choose the backend, and a backend refuses some access modes: a refusal may name either.
    fields: [createName, range, caps, map('parameters', ['backend', 'parameter', 'block', 'access']), secrets, contentSource, topology, map('mutable_parameters')],
  },
  DeleteVolume: { skeleton: () => ({ volume_id: 'fz-gone', ...sec }), fields: [id('volume_id'), secrets] },
  ControllerPublishVolume: {
    skeleton: (w) => ({ volume_id: w.dir.id, node_id: 'node-a', volume_capability: mountCap(), readonly: false, volume_context: {}, ...sec }),
    fields: [id('volume_id'), id('node_id', ['node']), cap, readonly, map('volume_context'), secrets],
  },
  ControllerUnpublishVolume: { skeleton: () => ({ volume_id: 'fz-gone', node_id: 'node-a', ...sec }), fields: [id('volume_id'), id('node_id', ['node']), secrets] },
  ValidateVolumeCapabilities: {
    skeleton: (w) => ({ volume_id: w.dir.id, volume_capabilities: [mountCap()], volume_context: {}, parameters: {}, ...sec }),
    fields: [id('volume_id'), caps, map('volume_context'), map('parameters'), secrets],
  },
  ListVolumes: { skeleton: () => ({ max_entries: 0, starting_token: '' }), fields: paging },
  ControllerGetVolume: { skeleton: (w) => ({ volume_id: w.dir.id }), fields: [id('volume_id')] },
  GetCapacity: { skeleton: () => ({ volume_capabilities: [mountCap()], parameters: { backend: 'dir' } }), fields: [caps, map('parameters'), field('accessible_topology', () => hostileMap.map((segments) => ({ segments })), ['topolog'])] },
  CreateSnapshot: { skeleton: (w) => ({ name: w.snapshotId, source_volume_id: w.dir.id, parameters: {}, ...sec }), fields: [createName, id('source_volume_id', ['source volume']), map('parameters'), secrets] },
  DeleteSnapshot: { skeleton: () => ({ snapshot_id: 'fz-gone-snap', ...sec }), fields: [id('snapshot_id'), secrets] },
  ListSnapshots: { skeleton: (w) => ({ max_entries: 0, starting_token: '', source_volume_id: w.dir.id, snapshot_id: '', ...sec }), fields: [...paging, id('source_volume_id'), id('snapshot_id'), secrets] },
  GetSnapshot: { skeleton: (w) => ({ snapshot_id: w.snapshotId, ...sec }), fields: [id('snapshot_id'), secrets] },
  ControllerExpandVolume: {
    skeleton: (w) => ({ volume_id: w.dir.id, capacity_range: { required_bytes: String(64 * 2 ** 20), limit_bytes: '0' }, volume_capability: mountCap(), ...sec }),
    fields: [id('volume_id'), range, cap, secrets],
  },
  ControllerModifyVolume: { skeleton: (w) => ({ volume_id: w.dir.id, mutable_parameters: { iops: '1' }, ...sec }), fields: [id('volume_id'), map('mutable_parameters'), secrets] },
  NodeStageVolume: {
    skeleton: (w) => ({ volume_id: w.blk.id, staging_target_path: w.blk.staging, volume_capability: blockVolumeCap, publish_context: {}, volume_context: {}, ...sec }),
    fields: [id('volume_id'), path('staging_target_path'), cap, map('publish_context'), map('volume_context'), secrets],
  },
  NodeUnstageVolume: { skeleton: (w) => ({ volume_id: 'fz-gone', staging_target_path: `${w.kubeletDir}/plugins/fz-gone/globalmount` }), fields: [id('volume_id'), field('staging_target_path', removablePath, PATH_NAMES)] },
  NodePublishVolume: {
    skeleton: (w) => ({ volume_id: w.dir.id, staging_target_path: w.dir.staging, target_path: w.dir.target, volume_capability: mountCap(), readonly: false, publish_context: {}, volume_context: {}, ...sec }),
    fields: [id('volume_id'), path('staging_target_path'), path('target_path'), cap, readonly, map('publish_context'), map('volume_context'), secrets],
  },
  NodeUnpublishVolume: { skeleton: (w) => ({ volume_id: 'fz-gone', target_path: `${w.kubeletDir}/pods/fz-gone/volumes/kubernetes.io~csi/v/mount` }), fields: [id('volume_id'), field('target_path', removablePath, PATH_NAMES)] },
  NodeGetVolumeStats: { skeleton: (w) => ({ volume_id: w.dir.id, volume_path: w.dir.target, staging_target_path: w.dir.staging }), fields: [id('volume_id'), path('volume_path'), path('staging_target_path')] },
  NodeExpandVolume: {
    skeleton: (w) => ({ volume_id: w.blk.id, volume_path: w.blk.target, staging_target_path: w.blk.staging, capacity_range: { required_bytes: String(64 * 2 ** 20), limit_bytes: '0' }, volume_capability: blockVolumeCap, ...sec }),
    fields: [id('volume_id'), path('volume_path'), path('staging_target_path'), range, cap, secrets],
  },
  CreateVolumeGroupSnapshot: {
    skeleton: (w) => ({ name: w.groupId, source_volume_ids: [w.dir.id], parameters: {}, ...sec }),
    fields: [createName, field('source_volume_ids', () => fc.array(hostileName, { maxLength: 3 }), ['source_volume_ids', 'volume']), map('parameters'), secrets],
  },
  GetVolumeGroupSnapshot: {
    skeleton: (w) => ({ group_snapshot_id: w.groupId, snapshot_ids: w.groupSnapshotIds, ...sec }),
    fields: [id('group_snapshot_id'), field('snapshot_ids', () => fc.array(hostileName, { maxLength: 3 }), ['snapshot_ids', 'snapshot']), secrets],
  },
  DeleteVolumeGroupSnapshot: {
    skeleton: () => ({ group_snapshot_id: 'fz-gone-group', snapshot_ids: [], ...sec }),
    fields: [id('group_snapshot_id'), field('snapshot_ids', () => fc.array(hostileName, { maxLength: 3 }), ['snapshot_ids', 'snapshot']), secrets],
  },
};

/** Paths for the calls that remove: everything hostilePath offers but the world's own mounts. */
function removablePath(w: FuzzWorld): fc.Arbitrary<string> {
  const own = new Set([w.dir.target, w.blk.target, w.dir.staging, w.blk.staging]);
  return hostilePath(w).filter((p) => !own.has(p));
}

/** The generator of one RPC's cases: its skeleton with up to two of its fields replaced. */
export function casesOf(method: string, w: FuzzWorld): fc.Arbitrary<FuzzCase> {
  const spec = SPECS[method];
  if (!spec) throw new Error(`no fuzz spec for ${method}: add one to test/fuzz/csi-arbitraries.ts`);
  const skeleton = spec.skeleton(w);
  if (!spec.fields.length) return fc.constant({ request: skeleton, mutations: [] });
  return fc.uniqueArray(fc.oneof(...spec.fields.map((f) => f(w))), { minLength: 1, maxLength: 2, selector: (m) => m.field }).map((mutations) => ({
    request: { ...skeleton, ...Object.fromEntries(mutations.map((m) => [m.field, m.value])) },
    mutations,
  }));
}
