import { type Claims, type Core, createVolume, endInlineIfUnmounted, expandOnNode, failedPrecondition, invalidArgument, publish, publishingInline, stage, unpublish, unstage, validatePathUnder, validateVolumeId, type VolumeId, volumeStats } from '../shared/index.js';
import { type Capability, accessRequestOf, parseCapability } from './capabilities.js';
import type { ServiceContext } from './context.js';
import { parseRange } from './capacity.js';
import { ephemeralSpec, isEphemeralRequest } from './ephemeral.js';
import type {
  Empty,
  NodeCapabilityName,
  NodeExpandVolumeRequest,
  NodeExpandVolumeResponse,
  NodeGetCapabilitiesRequest,
  NodeGetCapabilitiesResponse,
  NodeGetInfoRequest,
  NodeGetInfoResponse,
  NodeGetVolumeStatsRequest,
  NodeGetVolumeStatsResponse,
  NodeHandlers,
  NodePublishVolumeRequest,
  NodeStageVolumeRequest,
  NodeUnpublishVolumeRequest,
  NodeUnstageVolumeRequest,
  VolumeUsage,
} from './csi-types.js';
import { nodeTopology } from './topology.js';

const CAPABILITIES: NodeCapabilityName[] = [
  'STAGE_UNSTAGE_VOLUME',
  'GET_VOLUME_STATS',
  'EXPAND_VOLUME',
  'VOLUME_CONDITION',
  'SINGLE_NODE_MULTI_WRITER',
  'VOLUME_MOUNT_GROUP',
];

export function nodeService({ core, rpc, settings }: ServiceContext): NodeHandlers {
  const changes = <R extends { volume_id: string }>(path: (r: R) => string) => ({
    describe: (r: R) => ({ volumeId: r.volume_id, path: path(r) }),
    exclusiveOn: (r: R) => `volume/${r.volume_id}`,
  });
  const under = (value: string, what: string) => validatePathUnder(value, core.config.kubeletDir, what);

  return {
    NodeStageVolume: rpc.unary<NodeStageVolumeRequest, Empty>('NodeStageVolume', async (r) => {
      const id = validateVolumeId(r.volume_id, 'volume_id');
      const path = under(r.staging_target_path, 'staging_target_path');
      const cap = parseCapability(r.volume_capability);
      await stage(core, id, path, {
        readonly: cap.readerOnly,
        block: cap.access === 'block',
        mountFlags: cap.mountFlags,
        claims: contextClaims(r.volume_context),
        access: accessRequestOf(cap),
      });
      return {};
    }, changes((r) => r.staging_target_path)),

    NodeUnstageVolume: rpc.unary<NodeUnstageVolumeRequest, Empty>('NodeUnstageVolume', async (r, note) => {
      const id = validateVolumeId(r.volume_id, 'volume_id');
      const path = under(r.staging_target_path, 'staging_target_path');
      // OK carries no message: what twinvol left alone goes to the log as a warning.
      const left = await unstage(core, path, { volumeId: id });
      if (left) note({ warning: left });
      return {};
    }, changes((r) => r.staging_target_path)),

    NodePublishVolume: rpc.unary<NodePublishVolumeRequest, Empty>('NodePublishVolume', async (r) => {
      const id = validateVolumeId(r.volume_id, 'volume_id');
      const target = under(r.target_path, 'target_path');
      const cap = parseCapability(r.volume_capability);
      if (isEphemeralRequest(r.volume_context)) await publishEphemeral(core, id, target, cap, r);
      else await publishStaged(core, id, target, cap, r);
      return {};
    }, changes((r) => r.target_path)),

    NodeUnpublishVolume: rpc.unary<NodeUnpublishVolumeRequest, Empty>('NodeUnpublishVolume', async (r, note) => {
      const id = validateVolumeId(r.volume_id, 'volume_id');
      const target = under(r.target_path, 'target_path');
      const left = await unpublish(core, target, { volumeId: id });
      if (left) note({ warning: left });
      // An inline volume lives as long as its pod: gone with its last mount.
      await endInlineIfUnmounted(core, id);
      return {};
    }, changes((r) => r.target_path)),

    NodeGetVolumeStats: rpc.unary<NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse>('NodeGetVolumeStats', async (r) => {
      const id = validateVolumeId(r.volume_id, 'volume_id');
      if (!r.volume_path) throw invalidArgument('volume_path is required');
      const s = await volumeStats(core, id, r.volume_path);
      const usage: VolumeUsage[] = [{ unit: 'BYTES', total: String(s.totalBytes), available: String(s.availableBytes), used: String(s.usedBytes) }];
      // A raw block device has no inodes to count; reporting zeros would read as a full filesystem.
      if (s.totalInodes) usage.push({ unit: 'INODES', total: String(s.totalInodes), available: String(s.freeInodes), used: String(s.usedInodes) });
      return { usage, volume_condition: { abnormal: s.abnormal, message: s.message } };
    }, { describe: (r) => ({ volumeId: r.volume_id, path: r.volume_path }) }),

    NodeExpandVolume: rpc.unary<NodeExpandVolumeRequest, NodeExpandVolumeResponse>('NodeExpandVolume', async (r) => {
      const id = validateVolumeId(r.volume_id, 'volume_id');
      if (!r.volume_path) throw invalidArgument('volume_path is required');
      if (r.volume_capability) parseCapability(r.volume_capability);
      const volume = await expandOnNode(core, id, r.volume_path, parseRange(r.capacity_range).required);
      return { capacity_bytes: String(volume.capacityBytes) };
    }, changes((r) => r.volume_path)),

    NodeGetCapabilities: rpc.unary<NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse>('NodeGetCapabilities', async () => ({
      capabilities: CAPABILITIES.map((type) => ({ rpc: { type } })),
    })),

    NodeGetInfo: rpc.unary<NodeGetInfoRequest, NodeGetInfoResponse>('NodeGetInfo', async () => ({
      node_id: settings.nodeId,
      max_volumes_per_node: String(settings.maxVolumesPerNode),
      accessible_topology: nodeTopology(settings.nodeId),
    })),
  };
}

async function publishStaged(core: Core, id: VolumeId, target: string, cap: Capability, r: NodePublishVolumeRequest): Promise<void> {
  // twinvol advertises STAGE_UNSTAGE_VOLUME: a publish without a staging path skipped a step.
  if (!r.staging_target_path) throw failedPrecondition('staging_target_path is required: twinvol stages volumes before publishing them');
  const stagingPath = validatePathUnder(r.staging_target_path, core.config.kubeletDir, 'staging_target_path');
  await publish(core, id, target, {
    claims: contextClaims(r.volume_context),
    access: accessRequestOf(cap),
    readonly: r.readonly || cap.readerOnly,
    stagingPath,
    block: cap.access === 'block',
    fsGroup: cap.mountGroup,
    mountFlags: cap.mountFlags,
    via: 'csi',
  });
}

/** An inline volume: made on first publish, staged by twinvol itself (no stage call comes for it). */
async function publishEphemeral(core: Core, id: VolumeId, target: string, cap: Capability, r: NodePublishVolumeRequest): Promise<void> {
  if (cap.access !== 'mount') throw invalidArgument('an inline volume is a filesystem: use mount access');
  await createVolume(core, ephemeralSpec(id, r.volume_context));
  // A reader-only mode publishes read-only whatever readonly says, as for a staged volume (publishStaged),
  // told apart from readonly for the repeat of a publish an older twinvol made (PublishOptions.readerOnly).
  await publishingInline(core, id, () => publish(core, id, target, { readonly: r.readonly, readerOnly: cap.readerOnly, fsGroup: cap.mountGroup, mountFlags: cap.mountFlags, via: 'csi' }));
}


const contextClaims = (values: Readonly<Record<string, string>>): Claims => ({ values, what: 'volume_context key' });
