import type { SnapshotRecord, VolumeRecord } from '../shared/index.js';
import type { Snapshot, Timestamp, Volume, VolumeContentSource } from './csi-types.js';
import { volumeContextOf } from './parameters.js';

export function toCsiVolume(volume: VolumeRecord): Volume {
  return {
    capacity_bytes: String(volume.capacityBytes),
    volume_id: volume.id,
    volume_context: volumeContextOf(volume),
    content_source: contentSourceOf(volume),
    // Only a volume on a node-local data root is held somewhere in particular (shared/core/placement.ts).
    accessible_topology: volume.topology ? [{ segments: volume.topology }] : [],
  };
}

function contentSourceOf(volume: VolumeRecord): VolumeContentSource | null {
  const src = volume.contentSource;
  if (!src) return null;
  return src.kind === 'snapshot' ? { snapshot: { snapshot_id: src.id } } : { volume: { volume_id: src.id } };
}

export function toCsiSnapshot(snapshot: SnapshotRecord): Snapshot {
  return {
    size_bytes: String(snapshot.sizeBytes),
    snapshot_id: snapshot.id,
    source_volume_id: snapshot.sourceVolumeId,
    creation_time: toTimestamp(snapshot.createdAt),
    // The copy is complete before the record exists: a snapshot is usable as soon as it is listed.
    ready_to_use: true,
    group_snapshot_id: snapshot.groupId ?? '',
  };
}

export function toTimestamp(iso: string): Timestamp {
  const ms = Date.parse(iso);
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 };
}
