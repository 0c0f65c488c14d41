import type { Backend, PodInfo } from '../backends/backend.js';
import { backendFor } from '../backends/index.js';
import { alreadyExists, failedPrecondition } from '../errors.js';
import { applyFsGroup } from '../fs-group.js';
import type { MountRecord, Origin, VolumeRecord } from '../model.js';
import { describeMount } from '../mounter.js';
import { isMountPoint, mountAt } from '../mountinfo.js';
import { SCHEMA_VERSION } from '../store/json-record.js';
import { validateVolumeId, type VolumeId } from '../validate.js';
import { type AccessRequest, requireAccess } from './access.js';
import { type Claims, refuseContradiction } from './contradiction.js';
import { type Core, implicitStagingPath, now } from './core.js';
import { bindableFlags, bindFlagsFor, filesystemFlags, flagsLeftOff, sameFlags } from './mount-flags.js';
import { heldToReading } from '../mount-options.js';
import { checkedPathUnder, isStaleMount, makeMountPoint, removeMountPoint, unmountIfDead } from './mount-target.js';
import { attach, attachmentOf, releaseImplicitAttachment } from './attachments.js';
import { readOnlyIfAttachedSo, readsOnly, releaseOrphanedAttachment, requireSameVolume, stageLocked, type TeardownOptions, unstageLocked } from './staging.js';

export interface PublishOptions {
  /** What the request asks (CSI readonly, FlexVolume kubernetes.io/readwrite ro). */
  readonly: boolean;
  /**
   * An inline volume's access mode lets the pod only read (CSI *_READER_ONLY): published read-only
   * whatever `readonly` says. Apart from `readonly` because releases before commit 6f878c4 published
   * such a volume as `readonly` said, read-write, and kubelet's repeat of that very request after an
   * upgrade is answered as its own (a staged volume's publish was always held, and its caller folds
   * the mode into `readonly`: a publish made read-write is then another request's).
   */
  readerOnly?: boolean;
  /** The staging path to publish from; without it, the volume's staging on this node (or an implicit one). */
  stagingPath?: string;
  /** Raw block: bind the device node onto a file at the target. */
  block?: boolean;
  fsGroup?: number;
  /** The front end asking; recorded on an implicit staging's attachment. */
  via: Origin;
  /** What the request says of the volume: may repeat the catalog, never contradict it. */
  claims?: Claims;
  /** How the caller will use the volume; checked against its backend (shared/core/access.ts). */
  access?: AccessRequest;
  /** Extra mount options (CSI mount_flags), already validated with validateMountOptions; see bindFlagsFor. */
  mountFlags?: string[];
  /** For a backend that mounts a pod's target itself (Backend.publish): the pod, never recorded. */
  pod?: PodInfo;
  /** For a backend that mounts a pod's target itself: the request's secrets, never recorded or logged. */
  secrets?: Readonly<Record<string, string>>;
}

/**
 * Bind-mounts a staged volume into a pod's target. Repeating the same publish answers the same; the
 * same target with other options, or a target that holds someone else's mount, is AlreadyExists.
 */
export async function publish(core: Core, id: VolumeId, targetPath: string, opts: PublishOptions): Promise<VolumeRecord> {
  validateVolumeId(id);
  const target = await checkedPathUnder(targetPath, core.config.kubeletDir, 'target path');
  const stagingPath = opts.stagingPath && (await checkedPathUnder(opts.stagingPath, core.config.kubeletDir, 'staging path'));
  return core.nodeState.lockVolume(id, async () => {
    const volume = await core.catalog.requireVolume(id);
    // What the request itself says: a publish made as it said answers its repeat (see readerOnly).
    const asked = opts.readonly;
    opts = readOnlyIfAttachedSo(volume, core, opts.readerOnly ? { ...opts, readonly: true } : opts);
    if (opts.claims) refuseContradiction(volume, opts.claims);
    if (opts.access) requireAccess(volume, opts.access);
    if (opts.access?.singleWriter) await requireNoOtherPublish(core, id, target);
    const backend = backendFor(volume.backend);
    // kubelet applies a pod's group after a publish unless the plugin says it does not (flexvolume mounter.go).
    const fsGroup = opts.fsGroup !== undefined && (!backend.appliesFsGroup || (await backend.appliesFsGroup(volume, core))) ? opts.fsGroup : undefined;
    const existing = await core.nodeState.findByPath(target);
    if (existing && (existing.volumeId !== id || existing.kind !== 'publish'))
      throw alreadyExists(`${target} is already used by volume ${existing.volumeId}`);
    if (existing && ((existing.readonly !== opts.readonly && existing.readonly !== asked) || Boolean(existing.block) !== Boolean(opts.block)))
      throw alreadyExists(`volume ${id} is already published at ${target} ${existing.readonly ? 'read-only' : 'read-write'}`);
    if (existing && !sameFlags(existing.mountFlags, opts.mountFlags))
      throw alreadyExists(`volume ${id} is already published at ${target} with other mount flags`);
    // A repeat naming another staging is another publish: answered OK, the pod would keep the first one's mount.
    if (existing?.stagingPath !== undefined && stagingPath && existing.stagingPath !== stagingPath)
      throw alreadyExists(`volume ${id} is already published at ${target} from the staging at ${existing.stagingPath}, not ${stagingPath}`);
    const mounted = mountAt(target);
    if (mounted && !existing) throw alreadyExists(`${target} already holds a mount twinvol did not make: ${describeMount(mounted)}`);
    if (mounted) {
      // A pod's mount gone dead (stale), or a bind a killed call left without the flags its remount
      // was to apply (a read-only publish left writable), is forced off and bound again below, not answered OK.
      const remake = (await isStaleMount(target)) || (existing !== undefined && flagsLeftOff(backend, existing, await bindsFromRecord(core, backend, existing), mounted.mountOptions).length > 0);
      if (!remake) {
        // A walk cut short by a crash, or a pod asking for another group, is finished now, not answered as done.
        if (existing) await ensureFsGroup(core, existing, { ...opts, fsGroup });
        return volume;
      }
      await core.mounter.unmountAll(target);
    }

    // Storage gone from under a staging (its image deleted, the loop device detached lazily) still
    // mounts and reads, from what the kernel holds open; what a pod writes there is lost with the
    // last unmount. It was published all the same: now it is refused, saying why.
    const health = await backend.condition(volume, core);
    if (health.abnormal)
      throw failedPrecondition(`${health.message}: not publishing it, since what a pod wrote there would be lost; unstage it, then restore its data (from a snapshot, say) or delete it`);

    // Flags are checked before anything is made (a staging checks its own again in bindFromStaging).
    const unstagedFlags = unstagedBindFlags(opts);
    // The mount point first: a target that cannot be made must not leave a staging behind.
    await makeMountPoint(target, opts.block ? 'file' : 'dir');
    let madeStaging: MountRecord | undefined;
    let attachedHere = false;
    let mountedAnyway = false;
    let record: MountRecord;
    try {
      let staging: MountRecord | undefined;
      if (backend.publish && !stagingPath) {
        // A backend that mounts the target itself needs no staging; without one, an implicit
        // attachment stands for its mount, as an implicit staging's does (released by the last unpublish).
        staging = (await core.nodeState.listForVolume(id)).find((r) => r.kind === 'stage');
        if (!staging && !attachmentOf(volume, core.config.nodeName)) {
          await attach(core, id, core.config.nodeName, { readonly: false, via: opts.via, implicit: true });
          attachedHere = true;
        }
      } else {
        const found = await stagingFor(core, id, stagingPath, Boolean(opts.block), opts.via, filesystemFlags(opts.mountFlags ?? []));
        if (found.made) madeStaging = found.staging;
        staging = found.staging;
      }
      record = {
        schema: SCHEMA_VERSION,
        volumeId: id,
        path: target,
        kind: 'publish',
        readonly: opts.readonly,
        ...(staging ? { stagingPath: staging.path } : {}),
        ...(opts.block ? { block: true } : {}),
        ...(fsGroup !== undefined ? { fsGroup } : {}),
        ...(opts.mountFlags?.length ? { mountFlags: opts.mountFlags } : {}),
        createdAt: now(),
      };
      await core.nodeState.put(record);
      try {
        const own = backend.publish
          ? await backend.publish(volume, target, { ...ownMount(staging, opts, unstagedFlags), ...(staging && !staging.recordOnly ? { stagingPath: staging.path } : {}), ...(opts.fsGroup !== undefined ? { fsGroup: opts.fsGroup } : {}), ...(opts.pod ? { pod: opts.pod } : {}), ...(opts.secrets ? { secrets: opts.secrets } : {}) }, core)
          : false;
        if (!own) await bindFromStaging(core, volume, target, staging, opts);
      } catch (err) {
        // A FlexVolume driver's mount that failed, or ran out its deadline, after mounting leaves the
        // target mounted. The kernel is the truth: the record stays, so that an unpublish takes the
        // mount off (kubelet's teardown calls the driver's unmount all the same) and a retry finds
        // it published (kubelet's finds the path mounted), rather than one a record never names.
        mountedAnyway = isMountPoint(target);
        if (!mountedAnyway) await core.nodeState.remove(record);
        throw err;
      }
    } catch (err) {
      // What the mount left in place stands on the staging and attachment too.
      if (mountedAnyway) throw err;
      // Undo what this call made: the target, and any staging (with the attachment it stood for).
      await removeMountPoint(target);
      if (madeStaging) await unstageLocked(core, madeStaging).catch(() => undefined);
      if (attachedHere) await releaseImplicitAttachment(core, id, core.config.nodeName).catch(() => undefined);
      throw err;
    }
    await ensureFsGroup(core, record, { ...opts, fsGroup });
    return volume;
  });
}

/** The core's own publish: a bind of the staged filesystem (or of the device, for raw block) onto the target. */
async function bindFromStaging(core: Core, volume: VolumeRecord, target: string, staging: MountRecord | undefined, opts: PublishOptions): Promise<void> {
  const id = volume.id;
  if (!staging) throw failedPrecondition(`volume ${id}: its ${volume.backend} backend did not mount ${target} itself, and nothing is staged on this node to bind from`);
  // A device whose filesystem is mounted at the staging, bound raw into a pod, is a filesystem
  // written under its own mount: corrupted for every pod that has it mounted.
  if (Boolean(staging.block) !== Boolean(opts.block))
    throw failedPrecondition(`volume ${id} is staged at ${staging.path} for ${staging.block ? 'raw block' : 'filesystem'} access, not ${opts.block ? 'raw block' : 'filesystem'} access: stage it the way it is published`);
  const source = opts.block ? await deviceToBind(core, volume, readsOnly(volume, core.config.nodeName, opts.readonly, staging)) : staging.path;
  if (!opts.block && !isMountPoint(staging.path)) throw failedPrecondition(`volume ${id} is not mounted at its staging path ${staging.path}; stage it again`);
  const bindFlags = bindFlagsFor(opts.mountFlags ?? [], staging.mountFlags, opts.readonly);
  await core.mounter.bind(source, { path: target, within: core.config.kubeletDir }, opts.readonly, bindFlags);
}

/**
 * The device node a raw block publish binds: the staging's, or for a read-only publish (or one from a
 * read-only staging) a device that refuses writes. The read-only flag of the bind does not stop a
 * pod that opens the node for writing (see Backend.readOnlyDevice).
 */
async function deviceToBind(core: Core, volume: VolumeRecord, readonly: boolean): Promise<string> {
  const backend = backendFor(volume.backend);
  const staged = backend.attachedDevice(volume, core);
  if (!staged) throw failedPrecondition(`volume ${volume.id} has no device on this node; stage it first`);
  return readonly ? backend.readOnlyDevice(volume, core) : staged;
}

/**
 * How a backend's own publish is to mount the target. Without a staging: the publish's flags, as an
 * implicit staging would have accepted them. From a staging that is its record alone
 * (MountRecord.recordOnly): also what a bind from a mounted staging inherits from it, its read-only
 * flag and its bind flags, before the publish's own (the later of two contrary flags wins), and the
 * publish's flags checked against the staging's as bindFromStaging checks them. From a mounted
 * staging: the backend mounts from it as it knows how.
 */
function ownMount(staging: MountRecord | undefined, opts: PublishOptions, unstagedFlags: string[]): { readonly: boolean; bindFlags?: string[] } {
  if (!staging) return { readonly: opts.readonly, bindFlags: unstagedFlags };
  if (!staging.recordOnly) return { readonly: opts.readonly };
  const readonly = opts.readonly || staging.readonly;
  const flags = [...bindableFlags(staging.mountFlags ?? []), ...bindFlagsFor(opts.mountFlags ?? [], staging.mountFlags, opts.readonly)];
  return { readonly, bindFlags: heldToReading(readonly, flags) };
}

/**
 * The bind flags of a publish with no staging: what an implicit staging would have accepted (it took
 * the filesystem flags, see stagingFor), keeping only those a bind applies.
 */
function unstagedBindFlags(opts: PublishOptions): string[] {
  const flags = opts.mountFlags ?? [];
  return bindFlagsFor(flags, filesystemFlags(flags), opts.readonly);
}

/** The staging record whose flags a publish's bind carries (a backend's that stages a directory), read only then. */
async function bindsFromRecord(core: Core, backend: Backend, record: MountRecord): Promise<MountRecord | undefined> {
  return backend.stagedDirectory && record.stagingPath !== undefined ? core.nodeState.findByPath(record.stagingPath) : undefined;
}

/**
 * Group ownership of a read-write filesystem publish, recorded as intent first and as done after the
 * walk, so that a call killed during a walk over a large tree leaves a record the retry finishes from.
 */
async function ensureFsGroup(core: Core, record: MountRecord, opts: PublishOptions): Promise<void> {
  const gid = opts.fsGroup ?? record.fsGroup;
  if (gid === undefined || opts.readonly || opts.block || record.fsGroupApplied === gid) return;
  // A bind from a read-only staging is read-only too: a chown there fails EROFS on every retry.
  const staging = record.stagingPath === undefined ? undefined : await core.nodeState.findByPath(record.stagingPath);
  if (staging?.kind === 'stage' && staging.readonly) return;
  if (record.fsGroup !== gid) await core.nodeState.put({ ...record, fsGroup: gid, fsGroupApplied: undefined });
  await applyFsGroup(record.path, gid);
  await core.nodeState.put({ ...record, fsGroup: gid, fsGroupApplied: gid });
}

/** SINGLE_NODE_SINGLE_WRITER: one live publish of the volume on this node, whatever asked for the others. */
async function requireNoOtherPublish(core: Core, id: string, target: string): Promise<void> {
  const other = (await core.nodeState.listForVolume(id)).find((m) => m.kind === 'publish' && m.path !== target && isMountPoint(m.path));
  if (other) throw failedPrecondition(`volume ${id} is single-writer and already published at ${other.path}`);
}

/**
 * The staging a publish binds from: the one named, else the volume's staging on this node. A caller
 * with no stage step (non-attachable FlexVolume, CSI inline volumes) gets twinvol's own, made here;
 * `made` says so, so that a failure later in the publish can undo it.
 */
async function stagingFor(
  core: Core,
  id: VolumeId,
  stagingPath: string | undefined,
  block: boolean,
  via: Origin,
  mountFlags: string[],
): Promise<{ staging: MountRecord; made: boolean }> {
  const stages = (await core.nodeState.listForVolume(id)).filter((r) => r.kind === 'stage');
  const found = stagingPath ? stages.find((r) => r.path === stagingPath) : (stages.find((r) => !r.implicit) ?? stages[0]);
  if (found) return { staging: found, made: false };
  if (stagingPath) throw failedPrecondition(`volume ${id} is not staged at ${stagingPath} on this node`);
  const path = implicitStagingPath(core, id);
  await stageLocked(core, id, path, { readonly: false, implicit: true, block, via, mountFlags });
  const made = await core.nodeState.findByPath(path);
  if (!made) throw failedPrecondition(`volume ${id} could not be staged on this node`);
  return { staging: made, made: true };
}

/**
 * Unmounts a target and removes it. Paths never published, or already gone, answer OK (kubelet calls
 * unmount on dirs it never mounted). Only what the node's records say twinvol mounted is unmounted: a
 * path without a record loses at most an empty mount point (what a call cut short after the unmount
 * leaves) and a dead mount (nothing is reachable through it, and kubelet cannot clean the pod up
 * while it is there); a live foreign mount or a file with data stays, named in the answer. When the last pod of
 * an implicitly staged volume leaves, the staging goes too, with the attachment it stood for; after a
 * reboot, that attachment goes with the first unpublish that finds nothing of the volume left.
 */
export async function unpublish(core: Core, targetPath: string, opts: TeardownOptions = {}): Promise<string | undefined> {
  const target = await checkedPathUnder(targetPath, core.config.kubeletDir, 'target path');
  const record = await core.nodeState.findByPath(target);
  requireSameVolume(record, target, opts, 'publish');
  if (!record) {
    await unmountIfDead(core, target);
    const id = opts.volumeId ?? opts.guessedVolumeId;
    if (id) await releaseOrphanedAttachment(core, id);
    return removeMountPoint(target);
  }
  return core.nodeState.lockVolume(record.volumeId, async () => {
    // A backend that publishes itself unpublishes itself; "declined" (or a mount it left) the core takes off.
    const volume = await core.catalog.getVolume(record.volumeId);
    const backend = volume && backendFor(volume.backend);
    if (volume && backend?.unpublish && isMountPoint(target)) await backend.unpublish(volume, target, core);
    await core.mounter.unmountAll(target);
    await core.nodeState.remove(record);
    const left = await removeMountPoint(target);
    const rest = await core.nodeState.listForVolume(record.volumeId);
    const staging = rest.find((r) => r.kind === 'stage' && r.path === record.stagingPath);
    if (staging?.implicit && !rest.some((r) => r.kind === 'publish' && r.stagingPath === staging.path)) {
      await unstageLocked(core, staging);
    }
    // The last mount a backend made without a staging: the implicit attachment it stood for goes.
    if (record.stagingPath === undefined && !rest.length) await releaseImplicitAttachment(core, record.volumeId, core.config.nodeName);
    return left;
  });
}

/** Mount records of one volume on this node, for access-mode checks and listings. */
export function mountsOf(core: Core, id: VolumeId): Promise<MountRecord[]> {
  return core.nodeState.listForVolume(validateVolumeId(id));
}
