import { backendFor } from '../backends/index.js';
import { alreadyExists, failedPrecondition, resourceExhausted } from '../errors.js';
import type { Attachment, Origin, VolumeRecord } from '../model.js';
import { mountAt, readMounts } from '../mountinfo.js';
import { type NodeId, validateNodeName, validateVolumeId, type VolumeId } from '../validate.js';
import { type AccessRequest, requireAccess } from './access.js';
import { type Claims, refuseContradiction } from './contradiction.js';
import { type Core, now } from './core.js';
import { requireRegisteredNode } from './nodes.js';

export interface AttachOptions {
  readonly: boolean;
  via: Origin;
  /** Refuse a new attachment when the node already holds this many volumes (CSI max_volumes_per_node). */
  maxVolumesPerNode?: number;
  /** How the node will use the volume; checked against its backend (shared/core/access.ts). */
  access?: AccessRequest;
  /**
   * Refuse a node that never registered (shared/core/nodes.ts) with NotFound, as CSI
   * ControllerPublishVolume must. FlexVolume registers the node it is given instead: the
   * controller-manager only names nodes it knows.
   */
  registeredNodesOnly?: boolean;
  /** What the request says of the volume: may repeat the catalog, never contradict it. */
  claims?: Claims;
  /** Made by an implicit staging, not an attach step (see Attachment.implicit). */
  implicit?: boolean;
}

/** An attachment, and what the backend's own attach gave for the node's stage (CSI publish_context). */
export interface Attached {
  attachment: Attachment;
  publishContext: Record<string, string>;
}

/**
 * Records that `node` holds the volume. This is the cluster-wide exclusivity point: a single-node
 * volume held by another node is refused, whichever front end asks, with the holder named.
 */
export async function attach(core: Core, id: VolumeId, node: NodeId, opts: AttachOptions): Promise<Attachment> {
  return (await attachWithContext(core, id, node, opts)).attachment;
}

/**
 * `attach`, with what a backend that attaches itself (Backend.controllerAttach) gave: it does so once
 * the rules allow it, before the record, and on every repeat.
 */
export async function attachWithContext(core: Core, id: VolumeId, node: NodeId, opts: AttachOptions): Promise<Attached> {
  validateVolumeId(id);
  validateNodeName(node);
  const counted = opts.maxVolumesPerNode ? await attachedCount(core, node, id) : 0;
  return core.catalog.lock('volume', id, async () => {
    const volume = await core.catalog.requireVolume(id);
    if (opts.claims) refuseContradiction(volume, opts.claims);
    if (opts.registeredNodesOnly) await requireRegisteredNode(core, node);
    if (opts.access) requireAccess(volume, opts.access);
    const backend = backendFor(volume.backend);
    // An implicit attachment stands for a node's own set-up (no attach step): the backend attaches nothing.
    const backendAttach = async () => (backend.controllerAttach && !opts.implicit ? backend.controllerAttach(volume, node, opts.readonly, core) : {});
    const mine = volume.attachments.find((a) => a.node === node);
    if (mine) {
      if (mine.readonly !== opts.readonly)
        throw alreadyExists(`volume ${id} is already attached to node ${node} ${mine.readonly ? 'read-only' : 'read-write'}`);
      const publishContext = await backendAttach();
      const implicit = Boolean(mine.implicit && opts.implicit);
      if (!mine.fenced && Boolean(mine.implicit) === implicit) return { attachment: mine, publishContext };
      // Attached again where it is still staged: the fence becomes the attachment it was. An attach
      // step over an implicit staging's attachment makes it that step's, for its detach to release.
      const { fenced: _, implicit: __, ...plain } = mine;
      const again: Attachment = implicit ? { ...plain, implicit } : plain;
      await core.catalog.updateVolumeUnlocked({ ...volume, attachments: volume.attachments.map((a) => (a === mine ? again : a)) });
      return { attachment: again, publishContext };
    }
    const holder = volume.attachments[0];
    if (volume.access === 'single-node' && holder)
      throw failedPrecondition(
        holder.fenced
          ? `volume ${id} was detached from node ${holder.node} but is still staged there; it is released when that node unstages it (if the node is gone: twinvol volume release ${id} --node ${holder.node} --force)`
          : `volume ${id} is attached to node ${holder.node}; a single-node volume attaches to one node at a time`,
      );
    // Storage that several nodes may only read (see accessMismatch in shared/core/access.ts) is shared
    // read-only on every side, or not at all.
    const writer = opts.readonly ? volume.attachments.find((a) => !a.readonly) : holder;
    if (writer && backendFor(volume.backend).nodeSharing === 'raw-read-only')
      throw failedPrecondition(`volume ${id} is attached to node ${writer.node}; a ${volume.backend} volume is shared between nodes read-only only`);
    if (opts.maxVolumesPerNode && counted >= opts.maxVolumesPerNode)
      throw resourceExhausted(`node ${node} already holds ${counted} volumes, its limit`);
    const publishContext = await backendAttach();
    const attachment: Attachment = { node, readonly: opts.readonly, at: now(), via: opts.via, ...(opts.implicit ? { implicit: true } : {}) };
    await core.catalog.updateVolumeUnlocked({ ...volume, attachments: [...volume.attachments, attachment] });
    return { attachment, publishContext };
  });
}

/**
 * Forgets that `node` holds the volume. Unknown volumes and absent attachments are fine: detach is
 * retried. A node that still has the volume staged keeps a fenced attachment (see Attachment.fenced
 * in shared/model.ts): the call succeeds, and no other node attaches the volume until that node's
 * last unstage. Returns whether it fenced.
 *
 * A backend that attaches itself detaches when the attachment goes: here, or, behind a fence, with
 * the unstage that lifts it (markNodeUse), since the node still uses what it would take away. With no
 * attachment recorded it is asked all the same: an attach whose reply was lost (a crash between the
 * backend's attach and the record) leaves nothing else to undo it.
 */
export async function detach(core: Core, id: VolumeId, node: NodeId): Promise<boolean> {
  validateVolumeId(id);
  validateNodeName(node);
  return core.catalog.lock('volume', id, async () => {
    const volume = await core.catalog.getVolume(id);
    if (!volume) return false;
    const mine = volume.attachments.find((a) => a.node === node);
    const backend = backendFor(volume.backend);
    if (!mine?.inUse && !mine?.implicit) await backend.controllerDetach?.(volume, node, core);
    if (!mine) return false;
    const attachments = mine.inUse ? volume.attachments.map((a) => (a === mine ? { ...a, fenced: true } : a)) : volume.attachments.filter((a) => a !== mine);
    if (!mine.fenced) await core.catalog.updateVolumeUnlocked({ ...volume, attachments });
    return Boolean(mine.inUse);
  });
}

/** Marks (inUse) or unmarks the volume as staged on `node`; unmarking removes a fenced attachment. */
export async function markNodeUse(core: Core, id: VolumeId, node: NodeId, inUse: boolean): Promise<void> {
  await core.catalog.lock('volume', id, async () => {
    const volume = await core.catalog.getVolume(id);
    const mine = volume?.attachments.find((a) => a.node === node);
    if (!volume || !mine || Boolean(mine.inUse) === inUse) return;
    const { inUse: _, ...unmarked } = mine;
    // The fence goes with the node's last staging: what a backend attached goes with it (see detach).
    if (!inUse && mine.fenced) await backendFor(volume.backend).controllerDetach?.(volume, node, core);
    const attachments = inUse
      ? volume.attachments.map((a) => (a === mine ? { ...a, inUse: true } : a))
      : mine.fenced
        ? volume.attachments.filter((a) => a !== mine)
        : volume.attachments.map((a) => (a === mine ? unmarked : a));
    await core.catalog.updateVolumeUnlocked({ ...volume, attachments });
  });
}

/**
 * The administrator's way out when a node died with the volume staged: removes its attachment,
 * fenced or not. Whatever that node still writes is no longer kept from other nodes. Refused when the
 * node named is this one and still holds the volume here (a mount or a raw block staging on record
 * and in the kernel, or its loop device): that node is not gone, and its teardown frees the volume.
 */
export async function releaseAttachment(core: Core, id: VolumeId, node: NodeId): Promise<boolean> {
  validateVolumeId(id);
  validateNodeName(node);
  const release = () =>
    core.catalog.lock('volume', id, async () => {
      const volume = await core.catalog.requireVolume(id);
      if (!volume.attachments.some((a) => a.node === node)) return false;
      await core.catalog.updateVolumeUnlocked({ ...volume, attachments: volume.attachments.filter((a) => a.node !== node) });
      return true;
    });
  if (node !== core.config.nodeName) return release();
  // Node lock first, then the catalog's (the order every node-side call takes): no stage slips in between.
  return core.nodeState.lockVolume(id, async () => {
    const volume = await core.catalog.requireVolume(id);
    const mounts = readMounts();
    // A staging that mounts nothing (raw block, or one that is its record alone) is there as long as its record.
    const live = (await core.nodeState.listForVolume(id)).find((r) => mountAt(r.path, mounts) || (r.kind === 'stage' && (r.block || r.recordOnly)));
    const [device] = backendFor(volume.backend).boundDevices(volume, core);
    if (live || device)
      throw failedPrecondition(
        `node ${node} is this node, and it still has volume ${id} ${live ? `${live.kind === 'stage' ? 'staged' : 'published'} at ${live.path}` : `bound to ${device}`}: it is not gone; tear the volume down here (kubelet's unmount and unmountdevice, CSI NodeUnpublish and NodeUnstage), which frees it`,
      );
    return release();
  });
}

/**
 * Removes the node's attachment if an implicit staging made it (Attachment.implicit), fenced or not:
 * the caller has found that nothing of that staging is left. Returns whether it did.
 */
export async function releaseImplicitAttachment(core: Core, id: VolumeId, node: NodeId): Promise<boolean> {
  return core.catalog.lock('volume', id, async () => {
    const volume = await core.catalog.getVolume(id);
    const mine = volume?.attachments.find((a) => a.node === node);
    if (!volume || !mine?.implicit) return false;
    await core.catalog.updateVolumeUnlocked({ ...volume, attachments: volume.attachments.filter((a) => a !== mine) });
    return true;
  });
}

/**
 * The nodes the volume is published to, as the CO asks (CSI ControllerGetVolume, ListVolumes): its
 * attachments, fenced ones aside (unpublished as far as the CO knows; they only keep other nodes
 * out). A backend that can tell (Backend.isAttached: a FlexVolume driver's isattached) leaves out a
 * node it says no longer has the volume; where it cannot tell, the record stands, as kubelet assumes.
 */
export async function publishedNodes(core: Core, volume: VolumeRecord): Promise<NodeId[]> {
  const backend = backendFor(volume.backend);
  const nodes: NodeId[] = [];
  for (const a of volume.attachments) {
    if (a.fenced) continue;
    if (!a.implicit && backend.isAttached && (await backend.isAttached(volume, a.node, core)) === false) continue;
    nodes.push(a.node);
  }
  return nodes;
}

/** The node's attachment, a fenced one (detached, still staged) not counting as attached. */
export function attachmentOf(volume: VolumeRecord, node: string): Attachment | undefined {
  return volume.attachments.find((a) => a.node === node && !a.fenced);
}

/**
 * Node-side work needs the volume attached to this node first (FlexVolume attach, CSI
 * ControllerPublishVolume), whichever front end attached it: this keeps single-node exclusivity
 * whole even when a caller skips the step.
 */
export function requireAttachedTo(volume: VolumeRecord, node: string): void {
  if (attachmentOf(volume, node)) return;
  const holder = volume.attachments[0];
  throw failedPrecondition(
    holder
      ? `volume ${volume.id} is attached to node ${holder.node}, not to this node ${node}`
      : `volume ${volume.id} is not attached to node ${node}: attach it (ControllerPublishVolume) first`,
  );
}

/** Volumes other than `except` attached to `node`: a scan, paid only when a limit is configured. */
async function attachedCount(core: Core, node: string, except: string): Promise<number> {
  let count = 0;
  for (const id of await core.catalog.listVolumeIds()) {
    if (id === except) continue;
    const v = await core.catalog.getVolume(id);
    if (v && attachmentOf(v, node)) count++;
  }
  return count;
}
