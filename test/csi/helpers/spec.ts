import type { Rpcs } from './client.js';

/** The enum values csi.proto v1.12.0 defines (container-storage-interface/spec), UNKNOWN left out. */
export const SPEC = {
  pluginService: ['CONTROLLER_SERVICE', 'VOLUME_ACCESSIBILITY_CONSTRAINTS', 'GROUP_CONTROLLER_SERVICE', 'SNAPSHOT_METADATA_SERVICE'],
  volumeExpansion: ['ONLINE', 'OFFLINE'],
  controller: [
    'CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME', 'LIST_VOLUMES', 'GET_CAPACITY', 'CREATE_DELETE_SNAPSHOT', 'LIST_SNAPSHOTS',
    'CLONE_VOLUME', 'PUBLISH_READONLY', 'EXPAND_VOLUME', 'LIST_VOLUMES_PUBLISHED_NODES', 'VOLUME_CONDITION', 'GET_VOLUME',
    'SINGLE_NODE_MULTI_WRITER', 'MODIFY_VOLUME', 'GET_SNAPSHOT',
  ],
  node: ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION', 'SINGLE_NODE_MULTI_WRITER', 'VOLUME_MOUNT_GROUP'],
};

/** Every RPC of csi/proto/csi.proto, by service. */
export const IDENTITY_RPCS = ['GetPluginInfo', 'GetPluginCapabilities', 'Probe'] as const;
export const CONTROLLER_RPCS = [
  'CreateVolume', 'DeleteVolume', 'ControllerPublishVolume', 'ControllerUnpublishVolume', 'ValidateVolumeCapabilities', 'ListVolumes',
  'GetCapacity', 'ControllerGetCapabilities', 'CreateSnapshot', 'DeleteSnapshot', 'ListSnapshots', 'ControllerExpandVolume',
  'ControllerGetVolume', 'ControllerModifyVolume', 'GetSnapshot',
] as const satisfies readonly (keyof Rpcs['Controller'])[];
export const GROUP_RPCS = [
  'GroupControllerGetCapabilities', 'CreateVolumeGroupSnapshot', 'GetVolumeGroupSnapshot', 'DeleteVolumeGroupSnapshot',
] as const satisfies readonly (keyof Rpcs['GroupController'])[];
export const NODE_RPCS = [
  'NodeStageVolume', 'NodeUnstageVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeGetVolumeStats', 'NodeExpandVolume',
  'NodeGetCapabilities', 'NodeGetInfo',
] as const satisfies readonly (keyof Rpcs['Node'])[];
