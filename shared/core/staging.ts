import { backendFor } from '../backends/index.js';
import { alreadyExists, failedPrecondition, invalidArgument, TwinvolError } from '../errors.js';
import type { MountRecord, Origin, VolumeRecord } from '../model.js';
import { describeMount } from '../mounter.js';
import { isMountPoint, mountAt } from '../mountinfo.js';
import { SCHEMA_VERSION } from '../store/json-record.js';
import { validateVolumeId, type VolumeId } from '../validate.js';
import { type AccessRequest, requireAccess } from './access.js';
import { attach, attachmentOf, detach, markNodeUse, releaseImplicitAttachment, requireAttachedTo } from './attachments.js';
import { type Claims, refuseContradiction } from './contradiction.js';
import { type Core, implicitStagingPath, now } from './core.js';
import { flagsLeftOff, sameFlags } from './mount-flags.js';
import { heldToReading } from '../mount-options.js';
import { checkedPathUnder, foreignMountAt, isStaleMount, makeMountPoint, removeMountPoint, unmountIfDead } from './mount-target.js';

export interface StageOptions {
  readonly: boolean;
  /** Raw block access: the device is made available, nothing is mounted. */
  block?: boolean;
  /** Staged by twinvol at its own path (see implicitStagingPath), not at a caller's. */
  implicit?: boolean;
  /** Which front end an implicit staging (and the attachment it stands for) is made for. */
  via?: Origin;
  /** Extra mount options (CSI mount_flags), already validated with validateMountOptions. */
  mountFlags?: string[];
  /** What the request says of the volume (CSI volume_context, FlexVolume options): may repeat the catalog, never contradict it. */
  claims?: Claims;
  /** How the caller will use the volume; checked against its backend (shared/core/access.ts). */
  access?: AccessRequest;
  /** What the attach gave the node (CSI publish_context), for a backend that attaches itself. */
  publishContext?: Readonly<Record<string, string>>;
  /**
   * The caller finds the staging again only by its mount, so it must be a mount point even where the
   * backend needs none (a dir volume's staging is otherwise its record alone: MountRecord.recordOnly).
   */
  mountPoint?: boolean;
}

export interface StageResult {
  volume: VolumeRecord;
  /** The device node, for backends that have one. */
  device: string;
}

/** Makes the volume a device on this node (FlexVolume waitforattach); returns the device path. */
export async function nodeAttach(core: Core, id: VolumeId, opts: { claims?: Claims } = {}): Promise<StageResult> {
  validateVolumeId(id);
  return core.nodeState.lockVolume(id, async () => {
    const volume = await core.catalog.requireVolume(id);
    if (opts.claims) refuseContradiction(volume, opts.claims);
    requireAttachedTo(volume, core.config.nodeName);
    return { volume, device: await backendFor(volume.backend).nodeAttach(volume, core) };
  });
}

/**
 * Mounts the volume's filesystem at a staging path, once per volume per node. The record is written
 * before the mount, so a crash in between leaves a record without a mount, which the next stage or
 * unstage repairs; a mount without a record is someone else's and is never stacked upon. A backend
 * with nothing to mount once for all pods (a dir volume) is staged by the record alone.
 */
export async function stage(core: Core, id: VolumeId, stagingPath: string, opts: StageOptions): Promise<StageResult> {
  validateVolumeId(id);
  const path = opts.implicit
    ? implicitStagingPath(core, id)
    : await checkedPathUnder(stagingPath, core.config.kubeletDir, 'staging path');
  return core.nodeState.lockVolume(id, () => stageLocked(core, id, path, opts));
}

/** Stage with the volume's node lock held; `path` is already validated. */
export async function stageLocked(core: Core, id: VolumeId, path: string, opts: StageOptions): Promise<StageResult> {
  const volume = await core.catalog.requireVolume(id);
  if (opts.claims) refuseContradiction(volume, opts.claims);
  if (opts.access) requireAccess(volume, opts.access);
  // Node-side work follows the attach step (FlexVolume attach, CSI ControllerPublishVolume), whichever
  // front end made it; an implicit staging makes its own attachment below.
  if (!opts.implicit) requireAttachedTo(volume, core.config.nodeName);
  // A staging made read-write before a read-only attachment held it to reading still answers a repeat.
  const asked = opts.readonly;
  opts = readOnlyIfAttachedSo(volume, core, opts);
  const backend = backendFor(volume.backend);
  const existing = await core.nodeState.findByPath(path);
  if (existing && (existing.volumeId !== id || existing.kind !== 'stage'))
    throw alreadyExists(`${path} is already used by volume ${existing.volumeId}`);
  if (existing && ((existing.readonly !== opts.readonly && existing.readonly !== asked) || Boolean(existing.block) !== Boolean(opts.block) || !sameFlags(existing.mountFlags, opts.mountFlags)))
    throw alreadyExists(`volume ${id} is already staged at ${path} with other options (${describeOptions(existing)})`);
  let mounted = mountAt(path);
  if (mounted && !existing) throw alreadyExists(`${path} already holds a mount twinvol did not make: ${describeMount(mounted)}`);
  // A repeated stage over a dead mount would answer "done" for a path no pod can use, and over a bind a
  // killed call left without the flags its remount was to apply (a read-only staging left writable),
  // done for work that was not: remade. Judged only where twinvol mounted (no unstage of the backend's own).
  const leftOff = mounted && existing && flagsLeftOff(backend, existing, undefined, mounted.mountOptions).length > 0;
  if (mounted && !opts.block && (leftOff || (await isStaleMount(path)))) {
    await core.mounter.unmountAll(path);
    mounted = undefined;
  }
  // Implicit staging stands in for the attach step the caller does not have, exclusivity included.
  const attachedByThisCall = Boolean(opts.implicit) && !attachmentOf(volume, core.config.nodeName);
  if (opts.implicit) await attach(core, id, core.config.nodeName, { readonly: false, via: opts.via ?? 'flex', implicit: true });
  // Marked before anything is set up on the node: from here until the last unstage, a detach fences
  // the volume rather than freeing it for another node (shared/core/attachments.ts detach).
  if (!attachmentOf(volume, core.config.nodeName)?.inUse) await markNodeUse(core, id, core.config.nodeName, true);
  // A staging a backend needs no mount for is its record (a dir volume's: each publish binds the
  // directory itself), unless the caller needs a mount point there. A repeat keeps what the first made.
  const recordOnly = !opts.block && (existing ? Boolean(existing.recordOnly) : Boolean(backend.stagedDirectory) && !opts.mountPoint);
  let filled = false;
  try {
    if (opts.block) {
      await core.nodeState.put(stageRecord(id, path, opts));
      return { volume, device: await backend.nodeAttach(volume, core) };
    }
    if (recordOnly) {
      if (!existing) {
        await makeMountPoint(path, 'dir');
        await core.nodeState.put(stageRecord(id, path, opts, true));
      }
    } else if (!mounted) {
      await makeMountPoint(path, 'dir');
      await core.nodeState.put(stageRecord(id, path, opts));
      filled = await backend.stage(volume, { path, within: opts.implicit ? core.config.stateDir : core.config.kubeletDir }, opts.readonly, core, opts.mountFlags && heldToReading(opts.readonly, opts.mountFlags), opts.publishContext);
    } else if (volume.fsResizePending && !opts.readonly && !existing?.readonly) {
      // A stage killed between its mount and the growth that follows it (xfs grows mounted) left the
      // filesystem at its old size, which the retry, finding it mounted, answered OK: a volume restored
      // larger than its snapshot stayed the snapshot's size, with no NodeExpandVolume ever to come.
      filled = await growMounted(core, volume, path);
    }
  } catch (err) {
    // What did get set up (a mount; a raw block staging's device) stays, with its record, for unstage;
    // otherwise this call undoes all it made, the in-use mark included. A record that could not be
    // written (a full state dir) or a device that could not be had (no free loop device) once left
    // that mark behind: with no staging for an unstage to find, a detach then fenced the volume.
    const setUp = opts.block ? backend.attachedDevice(volume, core) !== undefined : !recordOnly && isMountPoint(path);
    if (!setUp) await dropStaging(core, { volumeId: id, path, implicit: opts.implicit }, attachedByThisCall).catch(() => undefined);
    throw err;
  }
  if (volume.fsResizePending && filled) await core.catalog.updateVolume(id, (v) => ({ ...v, fsResizePending: undefined, fsResizeFrom: undefined }));
  return { volume, device: backend.attachedDevice(volume, core) ?? '' };
}

/**
 * Grows a staged filesystem to its backing size, as the first stage would have: false where the
 * kernel does not let it grow mounted (ext4 without CAP_SYS_RESOURCE), and it grows at the next stage.
 */
async function growMounted(core: Core, volume: VolumeRecord, path: string): Promise<boolean> {
  try {
    await backendFor(volume.backend).expandOnNode(volume, path, core);
    return true;
  } catch (err) {
    if (err instanceof TwinvolError && err.code === 'FailedPrecondition') return false;
    throw err;
  }
}

/**
 * Drops a staging record and what only it was holding: when no other staging of the volume is left
 * here, the device (losetup -d) and, if `releaseAttachment`, the attachment to this node that an
 * implicit staging stood for; an implicit staging's directory goes too. Both a finished unstage and a
 * stage that failed before mounting end here: a failed non-attachable mount once left a single-node
 * volume attached, refused to every other node, with no call ever coming to release it.
 */
async function dropStaging(
  core: Core,
  record: Pick<MountRecord, 'volumeId' | 'path' | 'implicit'>,
  releaseAttachment: boolean,
  known?: { volume: VolumeRecord | undefined },
): Promise<void> {
  // The record goes last: a call killed anywhere before leaves it, and the retry (kubelet's, or the
  // CSI sidecar's) finds it and releases the device and the attachment, instead of answering done
  // with a loop device bound forever.
  const others = (await core.nodeState.listForVolume(record.volumeId)).filter((r) => r.kind === 'stage' && r.path !== record.path);
  if (!others.length) {
    // `known`: the caller read the record under the same node lock (unstageLocked); not read twice.
    const volume = known ? known.volume : await core.catalog.getVolume(record.volumeId);
    if (volume) await backendFor(volume.backend).nodeDetach(volume, core);
    // The node side is gone: a fenced attachment (detached while staged) goes with it.
    await markNodeUse(core, record.volumeId, core.config.nodeName, false);
    if (releaseAttachment) await detach(core, record.volumeId, core.config.nodeName);
  }
  if (record.implicit) await removeMountPoint(record.path);
  await core.nodeState.remove(record);
}

function stageRecord(volumeId: VolumeId, path: string, opts: StageOptions, recordOnly = false): MountRecord {
  return {
    schema: SCHEMA_VERSION,
    volumeId,
    path,
    kind: 'stage',
    readonly: opts.readonly,
    ...(opts.block ? { block: true } : {}),
    ...(opts.implicit ? { implicit: true } : {}),
    ...(recordOnly ? { recordOnly: true } : {}),
    ...(opts.mountFlags?.length ? { mountFlags: opts.mountFlags } : {}),
    createdAt: now(),
  };
}

function describeOptions(rec: MountRecord): string {
  return [rec.readonly ? 'read-only' : 'read-write', rec.block ? 'raw block' : 'filesystem', ...(rec.mountFlags?.length ? ['with mount flags'] : [])].join(', ');
}

/**
 * Unmounts a staging path. Unknown or already unmounted paths are fine (unstage is retried, and after
 * a reboot nothing is left); a mount twinvol has no record of is someone else's and stays, named in
 * the answer. A path still published from is refused: pods come off first. When the
 * last staging of a volume goes, its device is released on this node.
 */
export async function unstage(core: Core, stagingPath: string, opts: TeardownOptions = {}): Promise<string | undefined> {
  const path = await checkedPathUnder(stagingPath, core.config.kubeletDir, 'staging path');
  const record = await core.nodeState.findByPath(path);
  requireSameVolume(record, path, opts, 'stage');
  if (!record) {
    // Not twinvol's: a live mount here is someone else's (a stage writes its record before mounting).
    await unmountIfDead(core, path);
    // After a reboot the node state is gone with the mounts it described: if this node stages the
    // volume nowhere, its mark in the catalog goes too, so a later detach does not leave a fence
    // that nothing on this node would ever lift.
    if (opts.volumeId) {
      const id = opts.volumeId;
      await core.nodeState.lockVolume(id, async () => {
        if (!(await core.nodeState.listForVolume(id)).some((r) => r.kind === 'stage')) await markNodeUse(core, id, core.config.nodeName, false);
      });
    }
    return foreignMountAt(path);
  }
  await core.nodeState.lockVolume(record.volumeId, () => unstageLocked(core, record));
}

/** Unstage with the volume's node lock held; also used for implicit staging when its last pod leaves. */
export async function unstageLocked(core: Core, record: MountRecord): Promise<void> {
  const users = await liveUsersOf(core, record);
  if (users.length) throw failedPrecondition(`volume ${record.volumeId} is still published at ${users.map((u) => u.path).join(', ')}`);
  if (record.block) return dropStaging(core, record, Boolean(record.implicit));
  // A backend that stages itself unstages itself; "declined" (or a mount it left) the core takes off.
  const volume = await core.catalog.getVolume(record.volumeId);
  const backend = volume && backendFor(volume.backend);
  if (volume && backend?.unstage && isMountPoint(record.path)) await backend.unstage(volume, record.path, core);
  await core.mounter.unmountAll(record.path);
  await dropStaging(core, record, Boolean(record.implicit), { volume });
}

/**
 * Publish records made from a staging path whose mounts still exist. A record whose mount is gone
 * (removed by hand, or its pod dir cleaned by kubelet) is dropped here: the kernel is the truth.
 */
async function liveUsersOf(core: Core, stagingRecord: MountRecord): Promise<MountRecord[]> {
  const live: MountRecord[] = [];
  for (const r of await core.nodeState.listForVolume(stagingRecord.volumeId)) {
    if (r.kind !== 'publish' || r.stagingPath !== stagingRecord.path) continue;
    if (isMountPoint(r.path)) live.push(r);
    else await core.nodeState.remove(r);
  }
  return live;
}

export interface TeardownOptions {
  /** The volume the caller means (CSI names it; FlexVolume's unmount names only the path). */
  volumeId?: VolumeId;
  /**
   * The volume a caller that cannot name it guesses from the path (FlexVolume: the PV a kubelet path
   * ends in, which for an inline volume is only the pod's name for it). Never held against a record;
   * used only when the node has no record of the path, to release what a reboot left orphaned.
   */
  guessedVolumeId?: VolumeId;
}

/**
 * After a reboot the node's records are gone with the mounts they described, and a teardown finds
 * none: an attachment an implicit staging made (no detach ever comes for it) is released once the
 * node holds nothing of the volume, as that staging's last unpublish would have done. Whichever
 * volume the caller names, releasing such an attachment is right: nothing on this node stands for it.
 *
 * An implicit staging that no publish record names is an orphan too: a publish makes it and writes
 * its own record under one node lock, and the last unpublish drops that record before unstaging it,
 * so a call killed in between (an unpublish before its unstage, a publish before its record) left it
 * mounted, its loop device bound and its attachment held, and an inline volume never deleted, while
 * the retried unpublish, finding no record of its target, answered done.
 */
export async function releaseOrphanedAttachment(core: Core, id: VolumeId): Promise<void> {
  await core.nodeState.lockVolume(id, async () => {
    const records = await core.nodeState.listForVolume(id);
    const orphans = records.filter((st) => st.kind === 'stage' && st.implicit && !records.some((r) => r.kind === 'publish' && r.stagingPath === st.path));
    for (const staging of orphans) await unstageLocked(core, staging);
    // Listed again only when an unstage changed what is left.
    const left = orphans.length ? await core.nodeState.listForVolume(id) : records;
    if (!left.length) await releaseImplicitAttachment(core, id, core.config.nodeName);
  });
}

/** A path that holds another volume's mount is never torn down in this volume's name. */
export function requireSameVolume(record: MountRecord | undefined, path: string, opts: TeardownOptions, kind: MountRecord['kind']): void {
  if (record && opts.volumeId !== undefined && record.volumeId !== opts.volumeId)
    throw invalidArgument(`${path} holds volume ${record.volumeId}, not ${opts.volumeId}`);
  // An unstage of a pod's target tore down that pod's live mount; an unpublish of a staging unmounted
  // it under its pods and dropped its record without releasing its loop device.
  const what = (k: MountRecord['kind']) => (k === 'stage' ? 'a staging path' : "a pod's target");
  if (record && record.kind !== kind) throw invalidArgument(`${path} is ${what(record.kind)} of volume ${record.volumeId}, not ${what(kind)}: nothing was changed`);
}

/**
 * A node the volume is attached to read-only (CSI ControllerPublishVolume readonly, which the spec
 * says the SP must honour) is held to reading, whatever a stage or publish asks: the catalog let
 * other nodes attach a volume it shares read-only only (shared/core/attachments.ts attach) on the
 * word of that flag, so a read-write mount here would be a second writer it refused.
 */
export function readOnlyIfAttachedSo<T extends { readonly: boolean }>(volume: VolumeRecord, core: Core, opts: T): T {
  return !opts.readonly && readsOnly(volume, core.config.nodeName, false, undefined) ? { ...opts, readonly: true } : opts;
}

/**
 * Whether a publish may not write: its own flag, its staging's, or this node's read-only attachment
 * (readOnlyIfAttachedSo above). `twinvol status` asks the same of the publishes it finds (shared/core/inventory.ts).
 */
export function readsOnly(volume: VolumeRecord, node: string, readonly: boolean, staging: Pick<MountRecord, 'readonly'> | undefined): boolean {
  return readonly || Boolean(staging?.readonly) || volume.attachments.some((a) => a.node === node && a.readonly);
}

