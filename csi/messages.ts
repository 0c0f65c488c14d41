// The csi.v1 messages twinvol reads and writes, as @grpc/proto-loader shapes them with LOADER_OPTIONS
// (definition.ts): proto field names, int64 as decimal strings, enums by name. In requests an unset
// message field arrives as null (or is absent), unset scalars as their defaults ("" / 0 / false / "0").
// Replies may leave fields out: the serializer fills the defaults.

export type StringMap = Record<string, string>;
/** int64 on the wire; proto-loader gives decimal strings, and accepts numbers or strings back. */
export type Int64 = string;
type Maybe<T> = T | null | undefined;

export type AccessModeName =
  | 'UNKNOWN'
  | 'SINGLE_NODE_WRITER'
  | 'SINGLE_NODE_READER_ONLY'
  | 'MULTI_NODE_READER_ONLY'
  | 'MULTI_NODE_SINGLE_WRITER'
  | 'MULTI_NODE_MULTI_WRITER'
  | 'SINGLE_NODE_SINGLE_WRITER'
  | 'SINGLE_NODE_MULTI_WRITER';

export interface MountVolume {
  fs_type: string;
  mount_flags: string[];
  volume_mount_group: string;
}

export interface VolumeCapability {
  block?: Maybe<Record<string, never>>;
  mount?: Maybe<MountVolume>;
  /** The oneof's virtual field: which of block / mount is set. */
  access_type?: Maybe<'block' | 'mount'>;
  access_mode: Maybe<{ mode: AccessModeName }>;
}

export interface CapacityRange {
  required_bytes: Int64;
  limit_bytes: Int64;
}

export interface VolumeContentSource {
  snapshot?: Maybe<{ snapshot_id: string }>;
  volume?: Maybe<{ volume_id: string }>;
  type?: Maybe<'snapshot' | 'volume'>;
}

export interface Topology {
  segments: StringMap;
}

export interface Volume {
  capacity_bytes: Int64;
  volume_id: string;
  volume_context: StringMap;
  content_source?: VolumeContentSource | null;
  accessible_topology: Topology[];
}

export interface VolumeCondition {
  abnormal: boolean;
  message: string;
}

export interface Timestamp {
  seconds: Int64;
  nanos: number;
}

export interface Snapshot {
  size_bytes: Int64;
  snapshot_id: string;
  source_volume_id: string;
  creation_time: Timestamp;
  ready_to_use: boolean;
  group_snapshot_id: string;
}

/** Requests of every service carry secrets; twinvol uses none and never logs them. */
interface WithSecrets {
  secrets: StringMap;
}

// --- Identity ---------------------------------------------------------------------------------

export type Empty = Record<string, never>;

export interface GetPluginInfoResponse {
  name: string;
  vendor_version: string;
  manifest: StringMap;
}

export type PluginCapability =
  | { service: { type: 'CONTROLLER_SERVICE' | 'VOLUME_ACCESSIBILITY_CONSTRAINTS' | 'GROUP_CONTROLLER_SERVICE' } }
  | { volume_expansion: { type: 'ONLINE' | 'OFFLINE' } };

export interface GetPluginCapabilitiesResponse {
  capabilities: PluginCapability[];
}

export interface ProbeResponse {
  ready: { value: boolean };
}

// --- Controller -------------------------------------------------------------------------------

export interface CreateVolumeRequest extends WithSecrets {
  name: string;
  capacity_range: Maybe<CapacityRange>;
  volume_capabilities: VolumeCapability[];
  parameters: StringMap;
  volume_content_source: Maybe<VolumeContentSource>;
  accessibility_requirements: Maybe<{ requisite: Topology[]; preferred: Topology[] }>;
  mutable_parameters: StringMap;
}

export interface CreateVolumeResponse {
  volume: Volume;
}

export interface DeleteVolumeRequest extends WithSecrets {
  volume_id: string;
}

export interface ControllerPublishVolumeRequest extends WithSecrets {
  volume_id: string;
  node_id: string;
  volume_capability: Maybe<VolumeCapability>;
  readonly: boolean;
  volume_context: StringMap;
}

export interface ControllerPublishVolumeResponse {
  publish_context: StringMap;
}

export interface ControllerUnpublishVolumeRequest extends WithSecrets {
  volume_id: string;
  node_id: string;
}

export interface ValidateVolumeCapabilitiesRequest extends WithSecrets {
  volume_id: string;
  volume_context: StringMap;
  volume_capabilities: VolumeCapability[];
  parameters: StringMap;
  mutable_parameters: StringMap;
}

export interface ValidateVolumeCapabilitiesResponse {
  confirmed: {
    volume_context: StringMap;
    volume_capabilities: VolumeCapability[];
    parameters: StringMap;
    mutable_parameters: StringMap;
  } | null;
  message: string;
}

export interface ListRequest {
  max_entries: number;
  starting_token: string;
}

export interface VolumeStatus {
  published_node_ids: string[];
  volume_condition: VolumeCondition;
}

export interface ListVolumesResponse {
  entries: { volume: Volume; status: VolumeStatus }[];
  next_token: string;
}

export interface ControllerGetVolumeRequest {
  volume_id: string;
}

export interface ControllerGetVolumeResponse {
  volume: Volume;
  status: VolumeStatus;
}

export interface GetCapacityRequest {
  volume_capabilities: VolumeCapability[];
  parameters: StringMap;
  accessible_topology: Maybe<Topology>;
}

export interface GetCapacityResponse {
  available_capacity: Int64;
}

export type ControllerCapabilityName =
  | 'CREATE_DELETE_VOLUME'
  | 'PUBLISH_UNPUBLISH_VOLUME'
  | 'LIST_VOLUMES'
  | 'GET_CAPACITY'
  | 'CREATE_DELETE_SNAPSHOT'
  | 'LIST_SNAPSHOTS'
  | 'CLONE_VOLUME'
  | 'PUBLISH_READONLY'
  | 'EXPAND_VOLUME'
  | 'LIST_VOLUMES_PUBLISHED_NODES'
  | 'VOLUME_CONDITION'
  | 'GET_VOLUME'
  | 'SINGLE_NODE_MULTI_WRITER'
  | 'GET_SNAPSHOT';

export interface ControllerGetCapabilitiesResponse {
  capabilities: { rpc: { type: ControllerCapabilityName } }[];
}

export interface CreateSnapshotRequest extends WithSecrets {
  source_volume_id: string;
  name: string;
  parameters: StringMap;
}

export interface SnapshotResponse {
  snapshot: Snapshot;
}

export interface SnapshotIdRequest extends WithSecrets {
  snapshot_id: string;
}

export interface ListSnapshotsRequest extends ListRequest, WithSecrets {
  source_volume_id: string;
  snapshot_id: string;
}

export interface ListSnapshotsResponse {
  entries: { snapshot: Snapshot }[];
  next_token: string;
}

export interface ControllerExpandVolumeRequest extends WithSecrets {
  volume_id: string;
  capacity_range: Maybe<CapacityRange>;
  volume_capability: Maybe<VolumeCapability>;
}

export interface ControllerExpandVolumeResponse {
  capacity_bytes: Int64;
  node_expansion_required: boolean;
}

// --- Node -------------------------------------------------------------------------------------

export interface NodeStageVolumeRequest extends WithSecrets {
  volume_id: string;
  publish_context: StringMap;
  staging_target_path: string;
  volume_capability: Maybe<VolumeCapability>;
  volume_context: StringMap;
}

export interface NodeUnstageVolumeRequest {
  volume_id: string;
  staging_target_path: string;
}

export interface NodePublishVolumeRequest extends WithSecrets {
  volume_id: string;
  publish_context: StringMap;
  staging_target_path: string;
  target_path: string;
  volume_capability: Maybe<VolumeCapability>;
  readonly: boolean;
  volume_context: StringMap;
}

export interface NodeUnpublishVolumeRequest {
  volume_id: string;
  target_path: string;
}

export interface NodeGetVolumeStatsRequest {
  volume_id: string;
  volume_path: string;
  staging_target_path: string;
}

export interface VolumeUsage {
  available: Int64;
  total: Int64;
  used: Int64;
  unit: 'BYTES' | 'INODES';
}

export interface NodeGetVolumeStatsResponse {
  usage: VolumeUsage[];
  volume_condition: VolumeCondition;
}

export interface NodeExpandVolumeRequest extends WithSecrets {
  volume_id: string;
  volume_path: string;
  capacity_range: Maybe<CapacityRange>;
  staging_target_path: string;
  volume_capability: Maybe<VolumeCapability>;
}

export interface NodeExpandVolumeResponse {
  capacity_bytes: Int64;
}

export type NodeCapabilityName =
  | 'STAGE_UNSTAGE_VOLUME'
  | 'GET_VOLUME_STATS'
  | 'EXPAND_VOLUME'
  | 'VOLUME_CONDITION'
  | 'SINGLE_NODE_MULTI_WRITER'
  | 'VOLUME_MOUNT_GROUP';

export interface NodeGetCapabilitiesResponse {
  capabilities: { rpc: { type: NodeCapabilityName } }[];
}

export interface NodeGetInfoResponse {
  node_id: string;
  max_volumes_per_node: Int64;
  accessible_topology: Topology;
}
