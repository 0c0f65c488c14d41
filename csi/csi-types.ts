// The CSI messages as twinvol's server handles them, from the types scripts/gen-types.mjs generates
// out of csi/proto/csi.proto (csi/generated/, not committed; `npm run typecheck` and `npm test`
// generate them first). A request is typed as proto-loader hands it over (every scalar present with
// its default, unset messages null: the generator's "__Output" flavour); a reply as the server may
// write it (fields optional: the serializer fills the defaults). The protocol is the one source: a
// field the proto renames or drops fails to compile here rather than being copied wrong by hand.

import type { GetPluginInfoRequest__Output } from './generated/csi/v1/GetPluginInfoRequest.js';
import type { GetPluginCapabilitiesRequest__Output } from './generated/csi/v1/GetPluginCapabilitiesRequest.js';
import type { ProbeRequest__Output } from './generated/csi/v1/ProbeRequest.js';
import type { ControllerGetCapabilitiesRequest__Output } from './generated/csi/v1/ControllerGetCapabilitiesRequest.js';
import type { NodeGetCapabilitiesRequest__Output } from './generated/csi/v1/NodeGetCapabilitiesRequest.js';
import type { NodeGetInfoRequest__Output } from './generated/csi/v1/NodeGetInfoRequest.js';
import type { GroupControllerGetCapabilitiesRequest__Output } from './generated/csi/v1/GroupControllerGetCapabilitiesRequest.js';
import type { CreateVolumeRequest__Output } from './generated/csi/v1/CreateVolumeRequest.js';
import type { DeleteVolumeRequest__Output } from './generated/csi/v1/DeleteVolumeRequest.js';
import type { ControllerPublishVolumeRequest__Output } from './generated/csi/v1/ControllerPublishVolumeRequest.js';
import type { ControllerUnpublishVolumeRequest__Output } from './generated/csi/v1/ControllerUnpublishVolumeRequest.js';
import type { ValidateVolumeCapabilitiesRequest__Output } from './generated/csi/v1/ValidateVolumeCapabilitiesRequest.js';
import type { ListVolumesRequest__Output } from './generated/csi/v1/ListVolumesRequest.js';
import type { ControllerGetVolumeRequest__Output } from './generated/csi/v1/ControllerGetVolumeRequest.js';
import type { GetCapacityRequest__Output } from './generated/csi/v1/GetCapacityRequest.js';
import type { CreateSnapshotRequest__Output } from './generated/csi/v1/CreateSnapshotRequest.js';
import type { DeleteSnapshotRequest__Output } from './generated/csi/v1/DeleteSnapshotRequest.js';
import type { GetSnapshotRequest__Output } from './generated/csi/v1/GetSnapshotRequest.js';
import type { ListSnapshotsRequest__Output } from './generated/csi/v1/ListSnapshotsRequest.js';
import type { ControllerExpandVolumeRequest__Output } from './generated/csi/v1/ControllerExpandVolumeRequest.js';
import type { ControllerModifyVolumeRequest__Output } from './generated/csi/v1/ControllerModifyVolumeRequest.js';
import type { NodeStageVolumeRequest__Output } from './generated/csi/v1/NodeStageVolumeRequest.js';
import type { NodeUnstageVolumeRequest__Output } from './generated/csi/v1/NodeUnstageVolumeRequest.js';
import type { NodePublishVolumeRequest__Output } from './generated/csi/v1/NodePublishVolumeRequest.js';
import type { NodeUnpublishVolumeRequest__Output } from './generated/csi/v1/NodeUnpublishVolumeRequest.js';
import type { NodeGetVolumeStatsRequest__Output } from './generated/csi/v1/NodeGetVolumeStatsRequest.js';
import type { NodeExpandVolumeRequest__Output } from './generated/csi/v1/NodeExpandVolumeRequest.js';
import type { VolumeCapability__Output } from './generated/csi/v1/VolumeCapability.js';
import type { CapacityRange__Output } from './generated/csi/v1/CapacityRange.js';
import type { VolumeContentSource__Output } from './generated/csi/v1/VolumeContentSource.js';
import type { Topology__Output } from './generated/csi/v1/Topology.js';
import type { TopologyRequirement__Output } from './generated/csi/v1/TopologyRequirement.js';
import type { CreateVolumeResponse as CreateVolumeResponseSent } from './generated/csi/v1/CreateVolumeResponse.js';
import type { ControllerPublishVolumeResponse as ControllerPublishVolumeResponseSent } from './generated/csi/v1/ControllerPublishVolumeResponse.js';
import type { ValidateVolumeCapabilitiesResponse as ValidateVolumeCapabilitiesResponseSent } from './generated/csi/v1/ValidateVolumeCapabilitiesResponse.js';
import type { ListVolumesResponse as ListVolumesResponseSent } from './generated/csi/v1/ListVolumesResponse.js';
import type { ControllerGetVolumeResponse as ControllerGetVolumeResponseSent } from './generated/csi/v1/ControllerGetVolumeResponse.js';
import type { GetCapacityResponse as GetCapacityResponseSent } from './generated/csi/v1/GetCapacityResponse.js';
import type { ControllerGetCapabilitiesResponse as ControllerGetCapabilitiesResponseSent } from './generated/csi/v1/ControllerGetCapabilitiesResponse.js';
import type { CreateSnapshotResponse as CreateSnapshotResponseSent } from './generated/csi/v1/CreateSnapshotResponse.js';
import type { GetSnapshotResponse as GetSnapshotResponseSent } from './generated/csi/v1/GetSnapshotResponse.js';
import type { ListSnapshotsResponse as ListSnapshotsResponseSent } from './generated/csi/v1/ListSnapshotsResponse.js';
import type { ControllerExpandVolumeResponse as ControllerExpandVolumeResponseSent } from './generated/csi/v1/ControllerExpandVolumeResponse.js';
import type { NodeGetVolumeStatsResponse as NodeGetVolumeStatsResponseSent } from './generated/csi/v1/NodeGetVolumeStatsResponse.js';
import type { NodeExpandVolumeResponse as NodeExpandVolumeResponseSent } from './generated/csi/v1/NodeExpandVolumeResponse.js';
import type { NodeGetCapabilitiesResponse as NodeGetCapabilitiesResponseSent } from './generated/csi/v1/NodeGetCapabilitiesResponse.js';
import type { NodeGetInfoResponse as NodeGetInfoResponseSent } from './generated/csi/v1/NodeGetInfoResponse.js';
import type { GetPluginInfoResponse as GetPluginInfoResponseSent } from './generated/csi/v1/GetPluginInfoResponse.js';
import type { GetPluginCapabilitiesResponse as GetPluginCapabilitiesResponseSent } from './generated/csi/v1/GetPluginCapabilitiesResponse.js';
import type { ProbeResponse as ProbeResponseSent } from './generated/csi/v1/ProbeResponse.js';
import type { PluginCapability as PluginCapabilitySent } from './generated/csi/v1/PluginCapability.js';
import type { Volume as VolumeSent } from './generated/csi/v1/Volume.js';
import type { Snapshot as SnapshotSent } from './generated/csi/v1/Snapshot.js';
import type { VolumeCondition as VolumeConditionSent } from './generated/csi/v1/VolumeCondition.js';
import type { VolumeUsage as VolumeUsageSent } from './generated/csi/v1/VolumeUsage.js';
import type { CreateVolumeGroupSnapshotRequest__Output } from './generated/csi/v1/CreateVolumeGroupSnapshotRequest.js';
import type { GetVolumeGroupSnapshotRequest__Output } from './generated/csi/v1/GetVolumeGroupSnapshotRequest.js';
import type { DeleteVolumeGroupSnapshotRequest__Output } from './generated/csi/v1/DeleteVolumeGroupSnapshotRequest.js';
import type { CreateVolumeGroupSnapshotResponse as CreateVolumeGroupSnapshotResponseSent } from './generated/csi/v1/CreateVolumeGroupSnapshotResponse.js';
import type { GetVolumeGroupSnapshotResponse as GetVolumeGroupSnapshotResponseSent } from './generated/csi/v1/GetVolumeGroupSnapshotResponse.js';
import type { GroupControllerGetCapabilitiesResponse as GroupControllerGetCapabilitiesResponseSent } from './generated/csi/v1/GroupControllerGetCapabilitiesResponse.js';
import type { VolumeGroupSnapshot as VolumeGroupSnapshotSent } from './generated/csi/v1/VolumeGroupSnapshot.js';
import type { _csi_v1_VolumeCapability_AccessMode_Mode__Output } from './generated/csi/v1/VolumeCapability.js';
import type { _csi_v1_ControllerServiceCapability_RPC_Type__Output } from './generated/csi/v1/ControllerServiceCapability.js';
import type { _csi_v1_NodeServiceCapability_RPC_Type__Output } from './generated/csi/v1/NodeServiceCapability.js';
import type { _csi_v1_ListVolumesResponse_VolumeStatus } from './generated/csi/v1/ListVolumesResponse.js';
import type { Timestamp as TimestampSent } from './generated/google/protobuf/Timestamp.js';

export type StringMap = Record<string, string>;
/**
 * An empty message as twinvol writes it: a reply without fields, or the test client's request to a
 * field-less call. A field-less request the server receives is named after its message below, as the
 * generated handler maps (end of this file) expect.
 */
export type Empty = Record<string, never>;
export type AccessModeName = _csi_v1_VolumeCapability_AccessMode_Mode__Output;
export type ControllerCapabilityName = _csi_v1_ControllerServiceCapability_RPC_Type__Output;
export type NodeCapabilityName = _csi_v1_NodeServiceCapability_RPC_Type__Output;
export type VolumeStatus = _csi_v1_ListVolumesResponse_VolumeStatus;
export type Timestamp = TimestampSent;
/** The paging fields ListVolumes and ListSnapshots share (csi/paging.ts). */
export type ListRequest = Pick<ListVolumesRequest, 'max_entries' | 'starting_token'>;

export type GetPluginInfoRequest = GetPluginInfoRequest__Output;
export type GetPluginCapabilitiesRequest = GetPluginCapabilitiesRequest__Output;
export type ProbeRequest = ProbeRequest__Output;
export type ControllerGetCapabilitiesRequest = ControllerGetCapabilitiesRequest__Output;
export type NodeGetCapabilitiesRequest = NodeGetCapabilitiesRequest__Output;
export type NodeGetInfoRequest = NodeGetInfoRequest__Output;
export type GroupControllerGetCapabilitiesRequest = GroupControllerGetCapabilitiesRequest__Output;
export type CreateVolumeRequest = CreateVolumeRequest__Output;
export type DeleteVolumeRequest = DeleteVolumeRequest__Output;
export type ControllerPublishVolumeRequest = ControllerPublishVolumeRequest__Output;
export type ControllerUnpublishVolumeRequest = ControllerUnpublishVolumeRequest__Output;
export type ValidateVolumeCapabilitiesRequest = ValidateVolumeCapabilitiesRequest__Output;
export type ListVolumesRequest = ListVolumesRequest__Output;
export type ControllerGetVolumeRequest = ControllerGetVolumeRequest__Output;
export type GetCapacityRequest = GetCapacityRequest__Output;
export type CreateSnapshotRequest = CreateSnapshotRequest__Output;
export type DeleteSnapshotRequest = DeleteSnapshotRequest__Output;
export type GetSnapshotRequest = GetSnapshotRequest__Output;
export type ListSnapshotsRequest = ListSnapshotsRequest__Output;
export type ControllerExpandVolumeRequest = ControllerExpandVolumeRequest__Output;
export type ControllerModifyVolumeRequest = ControllerModifyVolumeRequest__Output;
export type NodeStageVolumeRequest = NodeStageVolumeRequest__Output;
export type NodeUnstageVolumeRequest = NodeUnstageVolumeRequest__Output;
export type NodePublishVolumeRequest = NodePublishVolumeRequest__Output;
export type NodeUnpublishVolumeRequest = NodeUnpublishVolumeRequest__Output;
export type NodeGetVolumeStatsRequest = NodeGetVolumeStatsRequest__Output;
export type NodeExpandVolumeRequest = NodeExpandVolumeRequest__Output;
export type VolumeCapability = VolumeCapability__Output;
export type CapacityRange = CapacityRange__Output;
export type VolumeContentSource = VolumeContentSource__Output;
export type Topology = Topology__Output;
export type TopologyRequirement = TopologyRequirement__Output;

export type CreateVolumeResponse = CreateVolumeResponseSent;
export type ControllerPublishVolumeResponse = ControllerPublishVolumeResponseSent;
export type ValidateVolumeCapabilitiesResponse = ValidateVolumeCapabilitiesResponseSent;
export type ListVolumesResponse = ListVolumesResponseSent;
export type ControllerGetVolumeResponse = ControllerGetVolumeResponseSent;
export type GetCapacityResponse = GetCapacityResponseSent;
export type ControllerGetCapabilitiesResponse = ControllerGetCapabilitiesResponseSent;
export type CreateSnapshotResponse = CreateSnapshotResponseSent;
export type GetSnapshotResponse = GetSnapshotResponseSent;
export type ListSnapshotsResponse = ListSnapshotsResponseSent;
export type ControllerExpandVolumeResponse = ControllerExpandVolumeResponseSent;
export type NodeGetVolumeStatsResponse = NodeGetVolumeStatsResponseSent;
export type NodeExpandVolumeResponse = NodeExpandVolumeResponseSent;
export type NodeGetCapabilitiesResponse = NodeGetCapabilitiesResponseSent;
export type NodeGetInfoResponse = NodeGetInfoResponseSent;
export type GetPluginInfoResponse = GetPluginInfoResponseSent;
export type GetPluginCapabilitiesResponse = GetPluginCapabilitiesResponseSent;
export type ProbeResponse = ProbeResponseSent;
export type PluginCapability = PluginCapabilitySent;
export type Volume = VolumeSent;
export type Snapshot = SnapshotSent;
export type VolumeCondition = VolumeConditionSent;
export type VolumeUsage = VolumeUsageSent;
export type CreateVolumeGroupSnapshotRequest = CreateVolumeGroupSnapshotRequest__Output;
export type GetVolumeGroupSnapshotRequest = GetVolumeGroupSnapshotRequest__Output;
export type DeleteVolumeGroupSnapshotRequest = DeleteVolumeGroupSnapshotRequest__Output;
export type CreateVolumeGroupSnapshotResponse = CreateVolumeGroupSnapshotResponseSent;
export type GetVolumeGroupSnapshotResponse = GetVolumeGroupSnapshotResponseSent;
export type GroupControllerGetCapabilitiesResponse = GroupControllerGetCapabilitiesResponseSent;
export type VolumeGroupSnapshot = VolumeGroupSnapshotSent;

// The services' handler maps, method by method: a handler missing, misnamed or typed against the wrong
// request or reply fails to compile where csi/controller.ts, csi/node.ts, csi/identity.ts and
// csi/group-controller.ts build them, instead of answering UNIMPLEMENTED at run time.
export type { ControllerHandlers } from './generated/csi/v1/Controller.js';
export type { GroupControllerHandlers } from './generated/csi/v1/GroupController.js';
export type { IdentityHandlers } from './generated/csi/v1/Identity.js';
export type { NodeHandlers } from './generated/csi/v1/Node.js';
