import { failedPrecondition, invalidArgument } from '../errors.js';
import type { Config } from '../config.js';
import type { MountTarget } from '../pinned-target.js';
import type { Mounter } from '../mounter.js';
import type { BackendKind, Origin, VolumeRecord } from '../model.js';
import type { FsType, NodeId } from '../validate.js';
import type { Catalog } from '../store/catalog.js';
import type { FlexPort } from './exec.js';

export interface BackendContext {
  config: Config;
  catalog: Catalog;
  mounter: Mounter;
  /**
   * The port to third-party FlexVolume drivers, handed in by the CSI server when it opens the core
   * (csi/server.ts): the core never imports the runner that calls them (execa), so the FlexVolume
   * executable's bundle holds none of it. Absent there, and an exec volume's hooks refuse.
   */
  flex?: FlexPort;
  /**
   * Told each step of a long operation as it starts ("formatting ext4 on 100 GiB"), for a person at a
   * terminal (flex/progress.ts); absent everywhere else, and never part of what a step does.
   */
  progress?: (step: string) => void;
}

/** The pod a publish is for (CSI pod info on mount: csi.storage.k8s.io/pod.* in the volume context). */
export interface PodInfo {
  name: string;
  namespace: string;
  uid: string;
  serviceAccount: string;
}

/** What a publish tells a backend that mounts a pod's target itself (Backend.publish). */
export interface BackendPublish {
  readonly: boolean;
  /** The staging on this node to bind from, if the volume has one mounted (one that is its record alone has nothing to bind). */
  stagingPath?: string;
  /**
   * The mount flags a bind can apply, checked by the core (shared/core/mount-flags.ts): the publish's,
   * after those of a staging that is its record alone (what a bind from a mounted one would inherit).
   */
  bindFlags?: readonly string[];
  fsGroup?: number;
  /** The pod, from the request; passed through, never recorded. */
  pod?: PodInfo;
  /** The request's secrets; passed through, never recorded or logged. */
  secrets?: Readonly<Record<string, string>>;
}

/** Where a new volume's content comes from: an existing volume's or snapshot's directory. */
export interface PopulateSource {
  backend: BackendKind;
  dir: string;
  sizeBytes: number;
}

/** The description of a new volume as a caller gave it, before its backend has checked it. */
export interface DescribedVolume {
  fsType?: string;
  source?: string;
  /** A list, or the comma-separated text a PV option or StorageClass parameter holds. */
  mountOptions?: string[] | string;
  /** Creation parameters: an exec volume's name its driver (shared/backends/exec.ts). */
  parameters?: Readonly<Record<string, string>>;
  createdBy: Origin;
}

/** How a volume's backing data looks from the controller's side (CSI VolumeCondition). */
export interface VolumeHealth {
  abnormal: boolean;
  message: string;
}

/**
 * What differs between kinds of storage. Everything else (records, locks, reference counts, bind
 * mounts into pods, idempotency) is the core's and is the same for every backend.
 */
export interface Backend {
  readonly kind: BackendKind;
  /** The volume can be handed out as a device node (CSI raw block access). */
  readonly hasDevice: boolean;
  /**
   * A filesystem type is part of the volume (block: ext4 or xfs; static: the source's). A dir volume is
   * a bind-mounted directory: a requested fs type says nothing about it (provisioners often default one).
   */
  readonly hasFilesystemType: boolean;
  /**
   * What several nodes may do with the volume at once: 'read-write', or 'raw-read-only' for storage
   * whose filesystem only one node may mount and whose device several nodes may only read.
   */
  readonly nodeSharing: 'read-write' | 'raw-read-only';
  /** Growing the volume has a node half: the filesystem on the device grows where it is staged. */
  readonly expandsOnNode: boolean;
  /**
   * twinvol made and keeps the volume's data (dir, block), so it can size, copy, snapshot and delete
   * it; a static volume's data is someone else's, which also keeps it out of pod specs (inline volumes).
   */
  readonly ownsData: boolean;
  /**
   * twinvol makes the volume's filesystem (block): a caller may choose its type, the capacity is the
   * filesystem's real size, and content copied in must fit it and be of the same type.
   */
  readonly makesFilesystem: boolean;
  /** Sizes are whole multiples of this many bytes (a loop device's image: 1 MiB). */
  readonly sizeAlignment: number;
  /** The record fields only this backend knows how to fill, checked (throws InvalidArgument). */
  describe(spec: DescribedVolume, config: Config): Pick<VolumeRecord, 'fsType' | 'source' | 'mountOptions'>;
  /** Whether the volume's backing data is where the catalog says, at the cost of a stat or so. */
  condition(volume: VolumeRecord, ctx: BackendContext): Promise<VolumeHealth>;
  /** Fills a new entry's work directory with the volume's data (or a snapshot's copy of it). */
  populate(workDir: string, volume: VolumeRecord, ctx: BackendContext, from?: PopulateSource): Promise<void>;
  /** Copies a volume's data into a snapshot's work directory. */
  snapshot(volume: VolumeRecord, workDir: string, ctx: BackendContext): Promise<void>;
  /** Makes the volume a device on this node; returns its path, or "" where the backend has none. */
  nodeAttach(volume: VolumeRecord, ctx: BackendContext): Promise<string>;
  /** Device currently attached on this node (the one nodeAttach made, which takes writes), without attaching. */
  attachedDevice(volume: VolumeRecord, ctx: BackendContext): string | undefined;
  /**
   * A device of the volume on this node that refuses writes, for a read-only raw block publish:
   * attached if none is. A bind of the writable device with a read-only mount flag is no such thing:
   * the kernel checks that flag for the files of the filesystem the device node lies in, not for
   * the device the node opens. Released by nodeDetach.
   */
  readOnlyDevice(volume: VolumeRecord, ctx: BackendContext): Promise<string>;
  /** Every device of the volume on this node, writable or not: what a delete must not pull the image from under. */
  boundDevices(volume: VolumeRecord, ctx: BackendContext): string[];
  /** Releases every device of the volume on this node. */
  nodeDetach(volume: VolumeRecord, ctx: BackendContext): Promise<void>;
  /**
   * Mounts the volume's filesystem at `staging.path` (which exists and is not a mount point). Returns
   * whether the filesystem now fills its backing storage, so a pending resize can be marked done.
   * `mountFlags` are extra, validated mount options (CSI mount_flags). Not called for a staging that is
   * its record alone (MountRecord.recordOnly, shared/core/staging.ts).
   */
  stage(volume: VolumeRecord, staging: MountTarget, readonly: boolean, ctx: BackendContext, mountFlags?: readonly string[], publishContext?: Readonly<Record<string, string>>): Promise<boolean>;
  /** Grows the backing storage (controller side); the node's half, if any, is `expandsOnNode`. */
  expand(volume: VolumeRecord, newSize: number, ctx: BackendContext): Promise<void>;
  /**
   * Grows the volume on this node to its backing size (node side): the filesystem staged at
   * `stagingPath`, or, with none (a raw block volume), the device alone.
   */
  expandOnNode(volume: VolumeRecord, stagingPath: string | undefined, ctx: BackendContext): Promise<void>;

  // Hooks for storage whose attach and mounts someone else performs (an external FlexVolume driver,
  // shared/backends/exec.ts). The core still takes the lock, applies the rules and writes the records;
  // a backend without a hook gets the core's own behaviour.

  /**
   * The controller's half of an attach, done by the backend: returns what the node's stage needs of
   * it (CSI publish_context). Called by `attach` under the volume's lock once the rules allow the
   * attachment, before it is recorded, and on every repeat (a driver's attach is idempotent, and the
   * repeat needs the same answer).
   */
  controllerAttach?(volume: VolumeRecord, node: NodeId, readonly: boolean, ctx: BackendContext): Promise<Record<string, string>>;
  /** Undoes controllerAttach for `node`, when its attachment goes (`detach`, or the unstage that lifts a fence). */
  controllerDetach?(volume: VolumeRecord, node: NodeId, ctx: BackendContext): Promise<void>;
  /**
   * What the controller can learn of `node`'s attachment from the backend itself: undefined when it
   * cannot tell (the catalog's record stands).
   */
  isAttached?(volume: VolumeRecord, node: NodeId, ctx: BackendContext): Promise<boolean | undefined>;
  /**
   * Mounts the volume at a pod's target itself (`target` exists, nothing is mounted there). false: it
   * declines, and the core bind-mounts the staging as for any backend. Without a staging the core
   * makes none: the backend's own mount is the whole node side (an implicit attachment stands for it).
   */
  publish?(volume: VolumeRecord, target: string, opts: BackendPublish, ctx: BackendContext): Promise<boolean>;
  /** Unmounts a target it may have published (something is mounted there). false: declined, the core unmounts. */
  unpublish?(volume: VolumeRecord, target: string, ctx: BackendContext): Promise<boolean>;
  /** Unmounts its staging (something is mounted there). false: declined, the core unmounts. */
  unstage?(volume: VolumeRecord, path: string, ctx: BackendContext): Promise<boolean>;
  /**
   * For a backend whose staging may be its record alone, mounting nothing (MountRecord.recordOnly): the
   * directory each publish then binds (its publish hook does, as with no staging), which stands for the
   * staging wherever the core would look at one (volume stats, twinvol status). Absent: a staging is
   * always a mount (or, raw block, a device).
   */
  stagedDirectory?(volume: VolumeRecord, ctx: BackendContext): string;
  /** Whether the core applies a pod's fsGroup after a publish (kubelet's SetVolumeOwnership); absent: yes. */
  appliesFsGroup?(volume: VolumeRecord, ctx: BackendContext): Promise<boolean>;
  /**
   * Whether this volume's growth has a node half, for a backend whose `expandsOnNode` depends on the
   * volume (a FlexVolume driver's requiresFSResize); absent: `expandsOnNode`. Read through
   * `growsOnNode`, the one place that decides.
   */
  expandsOnNodeFor?(volume: VolumeRecord, ctx: BackendContext): Promise<boolean>;
  /**
   * Why this node reports no usage of the volume (NodeGetVolumeStats), or undefined when it does;
   * absent: it always does. A FlexVolume driver whose init leaves supportsMetrics false has none in
   * kubelet (flexvolume plugin.go: MetricsNil).
   */
  withoutUsage?(volume: VolumeRecord, ctx: BackendContext): Promise<string | undefined>;
}

/**
 * Whether growing `volume` has a node half (NodeExpandVolume, FlexVolume expandfs): the backend's
 * `expandsOnNode`, narrowed per volume where the backend says so. The controller's answer
 * (node_expansion_required) and the node's call both ask here, so the two never disagree.
 */
export async function growsOnNode(backend: Backend, volume: VolumeRecord, ctx: BackendContext): Promise<boolean> {
  if (!backend.expandsOnNode) return false;
  return backend.expandsOnNodeFor ? backend.expandsOnNodeFor(volume, ctx) : true;
}

/** describe() for a backend whose volumes take none of a static volume's fields. */
export function describeOwned(kind: BackendKind, spec: DescribedVolume): void {
  if (spec.source !== undefined || (spec.mountOptions !== undefined && spec.mountOptions.length > 0))
    throw invalidArgument(`source and mountOptions belong to static volumes, not ${kind}`);
}

/** The device half of a backend that mounts without a block device of its own (dir, static). */
export const withoutDevice: Pick<Backend, 'nodeAttach' | 'attachedDevice' | 'readOnlyDevice' | 'boundDevices' | 'nodeDetach'> = {
  async nodeAttach() {
    return '';
  },
  attachedDevice() {
    return undefined;
  },
  async readOnlyDevice() {
    return '';
  },
  boundDevices() {
    return [];
  },
  async nodeDetach() {},
};

/**
 * Formats a device found with no filesystem (`probed`: what blkid found on it) as `fsType`: the rule
 * of every backend that formats what it finds blank (block's stage, the exec backend's FormatAndMount
 * fallback). A read-only staging formats nothing, and a disk that holds a partition table (a pod
 * partitioned it through raw block access; blkid names no filesystem on such a disk) is never
 * formatted over, as kubelet's FormatAndMount refuses it too.
 */
export async function formatBlank(ctx: BackendContext, volume: VolumeRecord, device: string, fsType: FsType, readonly: boolean, probed: { partitionTable?: string }): Promise<void> {
  if (readonly) throw failedPrecondition(`volume ${volume.id} has no filesystem yet and is staged read-only: it cannot be formatted`);
  if (probed.partitionTable !== undefined)
    throw failedPrecondition(`volume ${volume.id} holds a ${probed.partitionTable} partition table and no filesystem: refusing to format it; use it as a raw block device`);
  ctx.progress?.(`formatting ${fsType} on ${device}`);
  await ctx.mounter.format(device, fsType);
}
