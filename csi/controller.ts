import { attach, contradiction, type Core, createSnapshot, deleteSnapshot, deleteVolume, detach, expandVolume, getSnapshot, idForNameOrUndefined, invalidArgument, listSnapshots, type LogFields, publishedNodes, sameStringMap, validateName, validateNodeName, validateSnapshotId, validateVolumeId, volumeCondition, type VolumeRecord } from '../shared/index.js';
import { accessRequestOf, mismatch, parseCapabilities, parseCapability } from './capabilities.js';
import { capacityRpc, parseRange } from './capacity.js';
import type { ServiceContext, Settings } from './context.js';
import { createVolumeRpc } from './create-volume.js';
import { toCsiSnapshot, toCsiVolume } from './convert.js';
import type {
  ControllerCapabilityName,
  ControllerExpandVolumeRequest,
  ControllerExpandVolumeResponse,
  ControllerGetCapabilitiesRequest,
  ControllerGetCapabilitiesResponse,
  ControllerGetVolumeRequest,
  ControllerGetVolumeResponse,
  ControllerHandlers,
  ControllerPublishVolumeRequest,
  ControllerPublishVolumeResponse,
  ControllerUnpublishVolumeRequest,
  CreateSnapshotRequest,
  CreateVolumeRequest,
  CreateVolumeResponse,
  DeleteVolumeRequest,
  Empty,
  GetCapacityRequest,
  GetCapacityResponse,
  ListVolumesRequest,
  ListSnapshotsRequest,
  ListSnapshotsResponse,
  ListVolumesResponse,
  CreateSnapshotResponse,
  DeleteSnapshotRequest,
  GetSnapshotRequest,
  GetSnapshotResponse,
  ValidateVolumeCapabilitiesRequest,
  ValidateVolumeCapabilitiesResponse,
  VolumeStatus,
} from './csi-types.js';
import { paginate, paginateIds } from './paging.js';
import { pluginKeys, withoutCoKeys } from './parameters.js';

const CAPABILITIES: ControllerCapabilityName[] = [
  'CREATE_DELETE_VOLUME',
  'PUBLISH_UNPUBLISH_VOLUME',
  'LIST_VOLUMES',
  'GET_CAPACITY',
  'CREATE_DELETE_SNAPSHOT',
  'LIST_SNAPSHOTS',
  'CLONE_VOLUME',
  'EXPAND_VOLUME',
  'PUBLISH_READONLY',
  'GET_VOLUME',
  'VOLUME_CONDITION',
  'LIST_VOLUMES_PUBLISHED_NODES',
  'SINGLE_NODE_MULTI_WRITER',
  'GET_SNAPSHOT',
];

export function controllerService({ core, rpc, settings }: ServiceContext): ControllerHandlers {
  const volume = <R extends { volume_id: string }>() => ({
    describe: (r: R) => ({ volumeId: r.volume_id }),
    exclusiveOn: (r: R) => `volume/${r.volume_id}`,
  });
  const readVolume = <R extends { volume_id: string }>() => ({ describe: (r: R) => ({ volumeId: r.volume_id }) });
  const snapshot = <R extends { snapshot_id: string }>() => ({
    describe: (r: R) => ({ snapshotId: r.snapshot_id }),
    exclusiveOn: (r: R) => `snapshot/${r.snapshot_id}`,
  });

  return {
    CreateVolume: rpc.unary<CreateVolumeRequest, CreateVolumeResponse>('CreateVolume', (r) => createVolumeRpc(core, r), {
      describe: (r) => named(r.name, 'volumeId'),
      exclusiveOn: (r) => `volume/${idForNameOrUndefined(r.name) ?? r.name}`,
    }),
    DeleteVolume: rpc.unary<DeleteVolumeRequest, Empty>('DeleteVolume', async (r) => {
      await deleteVolume(core, validateVolumeId(r.volume_id, 'volume_id'));
      return {};
    }, volume()),
    ControllerPublishVolume: rpc.unary<ControllerPublishVolumeRequest, ControllerPublishVolumeResponse>(
      'ControllerPublishVolume',
      (r) => publishRpc(core, settings, r),
      { describe: (r) => ({ volumeId: r.volume_id, nodeId: r.node_id }), exclusiveOn: (r) => `volume/${r.volume_id}` },
    ),
    ControllerUnpublishVolume: rpc.unary<ControllerUnpublishVolumeRequest, Empty>(
      'ControllerUnpublishVolume',
      (r) => unpublishRpc(core, r),
      { describe: (r) => ({ volumeId: r.volume_id, nodeId: r.node_id }), exclusiveOn: (r) => `volume/${r.volume_id}` },
    ),
    ValidateVolumeCapabilities: rpc.unary<ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse>(
      'ValidateVolumeCapabilities',
      (r) => validateRpc(core, r),
      readVolume(),
    ),
    ListVolumes: rpc.unary<ListVolumesRequest, ListVolumesResponse>('ListVolumes', (r) => listVolumesRpc(core, r)),
    ControllerGetVolume: rpc.unary<ControllerGetVolumeRequest, ControllerGetVolumeResponse>('ControllerGetVolume', async (r) => {
      const v = await core.catalog.requireVolume(validateVolumeId(r.volume_id, 'volume_id'));
      return { volume: toCsiVolume(v), status: await statusOf(core, v) };
    }, readVolume()),
    GetCapacity: rpc.unary<GetCapacityRequest, GetCapacityResponse>('GetCapacity', (r) => capacityRpc(core, r)),
    ControllerGetCapabilities: rpc.unary<ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse>('ControllerGetCapabilities', async () => ({
      capabilities: CAPABILITIES.map((type) => ({ rpc: { type } })),
    })),
    CreateSnapshot: rpc.unary<CreateSnapshotRequest, CreateSnapshotResponse>('CreateSnapshot', async (r) => {
      const name = validateName(r.name, 'name');
      const source = validateVolumeId(r.source_volume_id, 'source_volume_id');
      pluginKeys(r.parameters, 'parameters', []);
      return { snapshot: toCsiSnapshot((await createSnapshot(core, name, source)).snapshot) };
    }, {
      describe: (r) => ({ ...named(r.name, 'snapshotId'), volumeId: r.source_volume_id }),
      exclusiveOn: (r) => `snapshot/${idForNameOrUndefined(r.name) ?? r.name}`,
    }),
    DeleteSnapshot: rpc.unary<DeleteSnapshotRequest, Empty>('DeleteSnapshot', async (r) => {
      await deleteSnapshot(core, validateSnapshotId(r.snapshot_id, 'snapshot_id'));
      return {};
    }, snapshot()),
    ListSnapshots: rpc.unary<ListSnapshotsRequest, ListSnapshotsResponse>('ListSnapshots', async (r) => {
      const all = await listSnapshots(core, { snapshotId: r.snapshot_id || undefined, sourceVolumeId: r.source_volume_id || undefined });
      const page = paginate(all, r, 'snapshots');
      return { entries: page.items.map((s) => ({ snapshot: toCsiSnapshot(s) })), next_token: page.nextToken };
    }),
    GetSnapshot: rpc.unary<GetSnapshotRequest, GetSnapshotResponse>('GetSnapshot', async (r) => ({
      snapshot: toCsiSnapshot(await getSnapshot(core, validateSnapshotId(r.snapshot_id, 'snapshot_id'))),
    }), { describe: (r) => ({ snapshotId: r.snapshot_id }) }),
    ControllerExpandVolume: rpc.unary<ControllerExpandVolumeRequest, ControllerExpandVolumeResponse>(
      'ControllerExpandVolume',
      (r) => expandRpc(core, r),
      volume(),
    ),
    ControllerModifyVolume: rpc.unimplemented('ControllerModifyVolume'),
  };
}

/** A created entry's id for the log line, and its name too when the id was derived from it. */
function named(name: string, key: 'volumeId' | 'snapshotId'): LogFields {
  const id = idForNameOrUndefined(name);
  return id === name ? { [key]: id } : { ...(id ? { [key]: id } : {}), name };
}

/** A node that never registered (shared/core/nodes.ts) is NOT_FOUND, as the spec asks. */
async function publishRpc(core: Core, settings: Settings, req: ControllerPublishVolumeRequest): Promise<ControllerPublishVolumeResponse> {
  const id = validateVolumeId(req.volume_id, 'volume_id');
  const node = validateNodeName(req.node_id, 'node_id');
  const cap = parseCapability(req.volume_capability);
  await attach(core, id, node, {
    readonly: req.readonly,
    via: 'csi',
    maxVolumesPerNode: settings.maxVolumesPerNode || undefined,
    access: accessRequestOf(cap),
    registeredNodesOnly: true,
  });
  return { publish_context: {} };
}

/** An empty node_id means every node. Volumes and attachments already gone are fine: the call is retried. */
async function unpublishRpc(core: Core, req: ControllerUnpublishVolumeRequest): Promise<Empty> {
  const id = validateVolumeId(req.volume_id, 'volume_id');
  const nodes = req.node_id
    ? [validateNodeName(req.node_id, 'node_id')]
    : ((await core.catalog.getVolume(id))?.attachments.map((a) => a.node) ?? []);
  for (const node of nodes) await detach(core, id, node);
  return {};
}

async function validateRpc(core: Core, req: ValidateVolumeCapabilitiesRequest): Promise<ValidateVolumeCapabilitiesResponse> {
  const id = validateVolumeId(req.volume_id, 'volume_id');
  const caps = parseCapabilities(req.volume_capabilities);
  const volume = await core.catalog.requireVolume(id);
  const params = withoutCoKeys(req.parameters);
  const reasons = [
    ...caps.map((c) => mismatch(volume, c)),
    contradiction(volume, req.volume_context, 'volume_context key'),
    Object.keys(params).length && !sameStringMap(params, volume.parameters) ? `parameters differ from those volume ${id} was created with` : undefined,
  ].filter((r): r is string => Boolean(r));
  if (reasons.length) return { confirmed: null, message: reasons.join('; ') };
  return {
    confirmed: { volume_context: req.volume_context, volume_capabilities: req.volume_capabilities, parameters: req.parameters, mutable_parameters: {} },
    message: '',
  };
}

/**
 * How many volumes a listing looks at per turn of the event loop. A record the catalog kept costs one
 * synchronous stat and a dir volume's condition another (a few microseconds each), so a batch blocks
 * the loop well under a millisecond; records read anew are read in parallel, as many as the batch.
 */
const LIST_BATCH = 64;

/**
 * Pages over ids first, so only the records on the page are looked at (Catalog.listedVolumes: one stat
 * for a record unchanged since this process last read it), in batches, in order, yielding between
 * batches so other calls (Probe) are answered while 10,000 volumes are listed. A volume deleted
 * between the listing of ids and the look at its record is left out.
 */
async function listVolumesRpc(core: Core, req: ListVolumesRequest): Promise<ListVolumesResponse> {
  const page = paginateIds(await core.catalog.listVolumeIds(), req, 'volumes');
  const entries: ListVolumesResponse['entries'] = [];
  for (let i = 0; i < page.items.length; i += LIST_BATCH) {
    if (i) await new Promise<void>((resolve) => setImmediate(resolve));
    const volumes = (await core.catalog.listedVolumes(page.items.slice(i, i + LIST_BATCH))).filter((v) => v !== undefined);
    const statuses = await Promise.all(volumes.map((v) => statusOf(core, v)));
    volumes.forEach((v, k) => entries.push({ volume: toCsiVolume(v), status: statuses[k] }));
  }
  return { entries, next_token: page.nextToken };
}

async function statusOf(core: Core, volume: VolumeRecord): Promise<VolumeStatus> {
  return { published_node_ids: await publishedNodes(core, volume), volume_condition: await volumeCondition(core, volume) };
}

/**
 * A block volume always asks for the node step, even for raw block access: the node's loop device
 * only sees the grown image after a refresh. Answering from the backend (not from whether this call
 * grew anything) keeps a repeated call's answer identical.
 */
async function expandRpc(core: Core, req: ControllerExpandVolumeRequest): Promise<ControllerExpandVolumeResponse> {
  const id = validateVolumeId(req.volume_id, 'volume_id');
  if (!req.capacity_range) throw invalidArgument('capacity_range is required');
  if (req.volume_capability) parseCapability(req.volume_capability);
  const { required, limit } = parseRange(req.capacity_range);
  if (!required) throw invalidArgument('capacity_range.required_bytes must ask for a size');
  // The core rounds to the backend's units within the limit, under the volume's lock.
  const result = await expandVolume(core, id, required, limit);
  return { capacity_bytes: String(result.capacityBytes), node_expansion_required: result.nodeExpansionRequired };
}
