import type { Versioned } from './store/json-record.js';
import type { GroupSnapshotId, NodeId, SnapshotId, VolumeId } from './validate.js';

// exec: a third-party FlexVolume driver's volume, served by the CSI server (shared/backends/exec.ts).
export const BACKEND_KINDS = ['dir', 'block', 'static', 'exec'] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

/** single-node: attached to at most one node at a time (enforced across both front ends). */
export const ACCESS_SCOPES = ['single-node', 'multi-node'] as const;
export type AccessScope = (typeof ACCESS_SCOPES)[number];

export const ORIGINS = ['cli', 'flex', 'csi'] as const;
export type Origin = (typeof ORIGINS)[number];

/**
 * How a caller wants to use a volume, in neither model's words: FlexVolume and the admin CLI only say
 * single- or multi-node, CSI says it with an access mode and an access type (csi/capabilities.ts).
 */
export interface AccessRequest {
  scope: AccessScope;
  /** The device itself, no filesystem (CSI block access). */
  raw: boolean;
  /** Only reads (the *_READER_ONLY modes). */
  readerOnly: boolean;
  /** One published writer at a time on the node (SINGLE_NODE_SINGLE_WRITER). */
  singleWriter: boolean;
  /** A filesystem type the caller names; "" leaves it to the volume. */
  fsType: string;
}

export interface Attachment {
  node: NodeId;
  readonly: boolean;
  at: string;
  via: Origin;
  /** The node has the volume staged: set by its first stage, cleared when its last staging goes. */
  inUse?: boolean;
  /**
   * Detached (ControllerUnpublishVolume, FlexVolume detach) while the node still had it staged: kept
   * as a fence, so no other node attaches a volume this one may still write, until the node's last
   * unstage (or an administrator's `twinvol volume release`) removes it.
   */
  fenced?: boolean;
  /**
   * Made by an implicit staging (a FlexVolume mount without attach, a CSI inline volume), for which no
   * detach ever comes: released with that staging, or, once a reboot took the node's records with its
   * mounts, by the first teardown that finds the node holding nothing of the volume.
   */
  implicit?: boolean;
}

export interface ContentSource {
  kind: 'snapshot' | 'volume';
  id: VolumeId | SnapshotId;
}

/** Catalog record of one volume: cluster scope, beside its data under the data root. */
export interface VolumeRecord extends Versioned {
  /** The CSI CreateVolume name when that is a valid id, else derived from it (shared/names.ts). */
  id: VolumeId;
  /** The CSI CreateVolume name, only when it differs from the id; a repeated create must give the same. */
  name?: string;
  backend: BackendKind;
  capacityBytes: number;
  /** block: ext4 or xfs; static: the source's type; dir: "". */
  fsType: string;
  access: AccessScope;
  /**
   * The access requests the volume was created for, as a set (sorted, no duplicates: see accessSet in
   * shared/core/access.ts), compared on a repeated create. Absent in records written before they
   * were kept: those compare by `access` alone.
   */
  accessRequests?: AccessRequest[];
  /** static only. */
  source?: string;
  mountOptions?: string[];
  /** Creation parameters, compared on a repeated create. */
  parameters: Record<string, string>;
  contentSource?: ContentSource;
  /**
   * The topology segments of the node that holds the volume (shared/topology.ts), when the data root
   * is node-local (config dataRootScope "node"); absent when every node sees it.
   */
  topology?: Record<string, string>;
  attachments: Attachment[];
  /** The image grew while its filesystem did not (offline expansion, restore into a larger volume). */
  fsResizePending?: boolean;
  /**
   * block: the filesystem twinvol made on the image when it created the volume, so a stage mounts it
   * without asking blkid (shared/backends/block.ts). Absent for a volume made before twinvol formatted
   * at create, a copy, or one created for raw block access only: blkid decides at the first stage.
   */
  madeFilesystem?: 'ext4' | 'xfs';
  /** The size before the expansion still pending on a node (exec: expandfs's old size, expander.go). */
  fsResizeFrom?: number;
  /**
   * "pod": a CSI inline volume, which lives as long as its pod and is deleted with its last mount
   * (csi/node.ts NodeUnpublishVolume). Absent for every other volume.
   */
  lifetime?: 'pod';
  createdBy: Origin;
  createdAt: string;
}

export interface SnapshotRecord extends Versioned {
  /** The CSI CreateSnapshot name when that is a valid id, else derived from it (shared/names.ts). */
  id: SnapshotId;
  /** The CSI CreateSnapshot name, only when it differs from the id; a repeated create must give the same. */
  name?: string;
  sourceVolumeId: VolumeId;
  /** The group snapshot this one was cut with (shared/core/group-snapshots.ts); it is deleted with the group. */
  groupId?: GroupSnapshotId;
  backend: BackendKind;
  fsType: string;
  sizeBytes: number;
  createdAt: string;
}

/** Node-scope record of one mount twinvol made: what teardown needs, since unmount calls carry only a path. */
export interface MountRecord extends Versioned {
  volumeId: VolumeId;
  path: string;
  kind: 'stage' | 'publish';
  readonly: boolean;
  /** Raw block publish: the device node is bind-mounted onto a file. */
  block?: boolean;
  /** The staging mount a publish was made from. */
  stagingPath?: string;
  /** Staged by twinvol itself for a caller that has no stage step (non-attachable FlexVolume mount). */
  implicit?: boolean;
  /**
   * A staging that is this record alone: nothing is mounted at its path, and each publish binds the
   * backend's directory itself (Backend.stagedDirectory: a dir volume's). Schema 6.
   */
  recordOnly?: boolean;
  /** The group a publish asked for, recorded before the bind: a retry after a crash finishes its walk. */
  fsGroup?: number;
  /** The group whose ownership walk finished over the whole tree. */
  fsGroupApplied?: number;
  /** Extra mount options a stage or publish was made with (CSI mount_flags): a repeat must ask for the same. */
  mountFlags?: string[];
  createdAt: string;
}

/**
 * A node that may hold volumes, in the catalog: a CSI node server registers its node when it starts, a
 * FlexVolume attach the node the controller-manager names. ControllerPublishVolume to a node that
 * never registered is NotFound (shared/core/nodes.ts).
 */
export interface NodeRecord extends Versioned {
  nodeId: NodeId;
  /** The node's topology segments (shared/topology.ts); {} when registered by FlexVolume, which has none. */
  topology: Record<string, string>;
  registeredBy: Origin;
  /** When this registration (the first, or the last that changed the topology) was written. */
  registeredAt: string;
}

/** FlexVolume detach names the PV, not the volume: attach records the mapping here. */
export interface PvRecord extends Versioned {
  pvName: string;
  volumeId: VolumeId;
}

/**
 * A CSI VolumeGroupSnapshot: snapshots of several volumes cut at one point in time, filesystems staged
 * on the controller's node frozen across the cut (shared/core/group-snapshots.ts). Written last, after
 * every member: a group without its record is an attempt a crash cut short, which the retry redoes.
 */
export interface GroupSnapshotRecord extends Versioned {
  id: GroupSnapshotId;
  /** The CSI name, only when it differs from the id. */
  name?: string;
  /** In the order asked; members[i] is the snapshot of sourceVolumeIds[i]. */
  sourceVolumeIds: VolumeId[];
  members: SnapshotId[];
  createdAt: string;
}
