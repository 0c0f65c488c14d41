import {
  createGroupSnapshot,
  deleteGroupSnapshot,
  getGroupSnapshot,
  type GroupSnapshot,
  idForNameOrUndefined,
  invalidArgument,
  validateGroupSnapshotId,
  validateName,
  validateSnapshotId,
  validateVolumeId,
} from '../shared/index.js';
import type { ServiceContext } from './context.js';
import { toCsiSnapshot, toTimestamp } from './convert.js';
import type {
  CreateVolumeGroupSnapshotRequest,
  CreateVolumeGroupSnapshotResponse,
  DeleteVolumeGroupSnapshotRequest,
  Empty,
  GetVolumeGroupSnapshotRequest,
  GetVolumeGroupSnapshotResponse,
  GroupControllerGetCapabilitiesRequest,
  GroupControllerGetCapabilitiesResponse,
  GroupControllerHandlers,
  VolumeGroupSnapshot,
} from './csi-types.js';
import { pluginKeys } from './parameters.js';

/**
 * The CSI GroupController: VolumeGroupSnapshots translated to the core's verbs
 * (shared/core/group-snapshots.ts), which freeze, cut, thaw and record. Secrets are accepted and unused.
 */
export function groupControllerService({ core, rpc }: ServiceContext): GroupControllerHandlers {
  return {
    GroupControllerGetCapabilities: rpc.unary<GroupControllerGetCapabilitiesRequest, GroupControllerGetCapabilitiesResponse>('GroupControllerGetCapabilities', async () => ({
      capabilities: [{ rpc: { type: 'CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT' } }],
    })),

    CreateVolumeGroupSnapshot: rpc.unary<CreateVolumeGroupSnapshotRequest, CreateVolumeGroupSnapshotResponse>(
      'CreateVolumeGroupSnapshot',
      async (r) => {
        const name = validateName(r.name, 'name');
        if (!r.source_volume_ids.length) throw invalidArgument('source_volume_ids is required');
        const sources = r.source_volume_ids.map((v, i) => validateVolumeId(v, `source_volume_ids[${i}]`));
        pluginKeys(r.parameters, 'parameters', []);
        const made = await createGroupSnapshot(core, name, sources);
        return { group_snapshot: toCsiGroup(made) };
      },
      {
        describe: (r) => ({ groupSnapshotId: idForNameOrUndefined(r.name) ?? r.name, volumeIds: r.source_volume_ids.slice(0, 16) }),
        exclusiveOn: (r) => `group/${idForNameOrUndefined(r.name) ?? r.name}`,
      },
    ),

    GetVolumeGroupSnapshot: rpc.unary<GetVolumeGroupSnapshotRequest, GetVolumeGroupSnapshotResponse>('GetVolumeGroupSnapshot', async (r) => {
      const id = validateGroupSnapshotId(r.group_snapshot_id, 'group_snapshot_id');
      return { group_snapshot: toCsiGroup(await getGroupSnapshot(core, id, snapshotIdsOf(r.snapshot_ids))) };
    }),

    DeleteVolumeGroupSnapshot: rpc.unary<DeleteVolumeGroupSnapshotRequest, Empty>('DeleteVolumeGroupSnapshot', async (r) => {
      const id = validateGroupSnapshotId(r.group_snapshot_id, 'group_snapshot_id');
      await deleteGroupSnapshot(core, id, snapshotIdsOf(r.snapshot_ids));
      return {};
    }, {
      describe: (r) => ({ groupSnapshotId: r.group_snapshot_id }),
      exclusiveOn: (r) => `group/${r.group_snapshot_id}`,
    }),
  };
}

const snapshotIdsOf = (ids: readonly string[]) => ids.map((s, i) => validateSnapshotId(s, `snapshot_ids[${i}]`));

function toCsiGroup({ group, snapshots }: GroupSnapshot): VolumeGroupSnapshot {
  return {
    group_snapshot_id: group.id,
    snapshots: snapshots.map(toCsiSnapshot),
    creation_time: toTimestamp(group.createdAt),
    // The record is written after every member's copy is complete.
    ready_to_use: true,
  };
}
