import type { Config } from '../config.js';
import type { MountTarget } from '../pinned-target.js';
import type { Mounter } from '../mounter.js';
import type { BackendKind, VolumeRecord } from '../model.js';
import type { Catalog } from '../store/catalog.js';

export interface BackendContext {
  config: Config;
  catalog: Catalog;
  mounter: Mounter;
}

/** Where a new volume's content comes from: an existing volume's or snapshot's directory. */
export interface PopulateSource {
  backend: BackendKind;
  dir: string;
  sizeBytes: number;
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
  /** Fills a new entry's work directory with the volume's data (or a snapshot's copy of it). */
  populate(workDir: string, volume: VolumeRecord, ctx: BackendContext, from?: PopulateSource): Promise<void>;
  /** Copies a volume's data into a snapshot's work directory. */
  snapshot(volume: VolumeRecord, workDir: string, ctx: BackendContext): Promise<void>;
  /** Makes the volume a device on this node; returns its path, or "" where the backend has none. */
  nodeAttach(volume: VolumeRecord, ctx: BackendContext): Promise<string>;
  /** Device currently attached on this node, without attaching. */
  attachedDevice(volume: VolumeRecord, ctx: BackendContext): string | undefined;
  nodeDetach(volume: VolumeRecord, ctx: BackendContext): Promise<void>;
  /**
   * Mounts the volume's filesystem at `staging.path` (which exists and is not a mount point). Returns
   * whether the filesystem now fills its backing storage, so a pending resize can be marked done.
   * `mountFlags` are extra, validated mount options (CSI mount_flags).
   */
  stage(volume: VolumeRecord, staging: MountTarget, readonly: boolean, ctx: BackendContext, mountFlags?: readonly string[]): Promise<boolean>;
  /** Grows the backing storage (controller side); the node's half, if any, is `expandsOnNode`. */
  expand(volume: VolumeRecord, newSize: number, ctx: BackendContext): Promise<void>;
  /** Grows the filesystem of a staged volume to its backing size (node side). */
  expandOnNode(volume: VolumeRecord, stagingPath: string, ctx: BackendContext): Promise<void>;
}

/** The device half of a backend that mounts without a block device of its own (dir, static). */
export const withoutDevice: Pick<Backend, 'nodeAttach' | 'attachedDevice' | 'nodeDetach'> = {
  async nodeAttach() {
    return '';
  },
  attachedDevice() {
    return undefined;
  },
  async nodeDetach() {},
};
