import { readdir, stat } from '../fs-async.js';
import { basename, join } from 'node:path';
import { asTwinvolError } from '../errors.js';
import { loopDevices } from '../loop-devices.js';
import type { MountRecord, NodeRecord, VolumeRecord } from '../model.js';
import { type MountEntry, mountAt, readMounts } from '../mountinfo.js';
import { scratchOwnerGone } from '../bind-by-move.js';
import { isRecordTemp } from '../store/json-record.js';
import { isAbandonedLock, STALE_MS } from '../store/lock.js';
import type { Core } from './core.js';
import { kernelView, twinvolPath, writableLoopAt } from './inventory-kernel.js';
import { flagsLeftOff } from './mount-flags.js';
import { readsOnly } from './staging.js';
import { DEFAULT_CSI_DRIVER_NAME, volumeHandleHash } from '../kubelet-paths.js';
import { isExecVolume } from '../backends/exec.js';
import { backendFor } from '../backends/index.js';
import { notOnNetwork } from '../store/filesystem.js';
import { listVolumes } from './volumes.js';

/** The CSI driver name twinvol-csi serves by default (csi/flags.ts --driver-name). */

export const PROBLEM_KINDS = [
  'record-without-mount',
  'record-without-device',
  'record-of-unknown-volume',
  'mount-without-record',
  'mount-of-another-volume',
  'loop-without-record',
  'attachment-to-unregistered-node',
  'staged-mark-without-staging',
  'damaged-record',
  'stale-lock',
  'stale-temp-file',
  'abandoned-work',
  'data-root-not-mounted',
  'writable-read-only-publish',
  'mount-without-its-flags',
  'stranded-scratch-bind',
] as const;
export type ProblemKind = (typeof PROBLEM_KINDS)[number];

export interface Problem {
  kind: ProblemKind;
  /** What it is about: a path, a device, a volume id. */
  subject: string;
  volumeId?: string;
  /** One line: what is wrong, and what usually mends it. */
  detail: string;
}

/** One of this node's mount records, beside what the kernel has at its path. */
export interface MountLine {
  volumeId: string;
  kind: MountRecord['kind'];
  path: string;
  readonly: boolean;
  block: boolean;
  implicit: boolean;
  /** What is mounted at the path ("fstype source"), or undefined when nothing is (a raw block staging mounts nothing). */
  mounted?: string;
  /** A staging that is its record alone (a dir volume's): the directory each publish binds. */
  bindsFrom?: string;
}

export interface LoopLine {
  device: string;
  backingFile: string;
  /** The volume whose image backs it, if the file is one. */
  volumeId?: string;
  deleted: boolean;
  /** It refuses writes (a read-only raw block publish's device). */
  readOnly: boolean;
}

export interface Inventory {
  node: string;
  dataRoot: string;
  stateDir: string;
  kubeletDir: string;
  volumes: VolumeRecord[];
  nodes: NodeRecord[];
  mounts: MountLine[];
  loops: LoopLine[];
  problems: Problem[];
  consistent: boolean;
}

export interface InventoryOptions {
  /** The CSI driver name kubelet uses for twinvol here (its staging paths carry it). */
  csiDriverName?: string;
}

/**
 * What this node and the catalog hold, and everything in them that does not agree (`twinvol status`).
 * The kernel's tables (/proc/self/mountinfo, sysfs loop devices) are the truth the records are held
 * against. Read without taking any lock, so a call in flight on this node may show as a passing
 * inconsistency: a second look tells it from a lasting one.
 */
export async function inventory(core: Core, opts: InventoryOptions = {}): Promise<Inventory> {
  const { config } = core;
  const problems: Problem[] = [];
  const damaged = (subject: string, err: unknown) => problems.push({ kind: 'damaged-record', subject, detail: asTwinvolError(err).message });

  // Asked first: with the share not mounted, what follows describes the empty directory beneath it.
  const beneath = config.dataRootOnNetwork ? await notOnNetwork(config.dataRoot) : undefined;
  if (beneath !== undefined)
    problems.push({
      kind: 'data-root-not-mounted',
      subject: config.dataRoot,
      detail: `the data root lies on ${beneath}, and setting dataRootOnNetwork says it is a network filesystem: mount it; until then nothing in the catalog changes, and the volumes below are not the catalog's`,
    });
  const { volumes, unreadable } = await listVolumes(core);
  for (const u of unreadable) problems.push({ kind: 'damaged-record', subject: `volume ${u.id}`, detail: u.reason });
  let nodes: NodeRecord[] = [];
  try {
    nodes = await core.catalog.listNodes();
  } catch (err) {
    damaged('nodes', err);
  }
  let records: MountRecord[] = [];
  let recordsRead = true;
  try {
    records = await core.nodeState.listAll();
  } catch (err) {
    recordsRead = false;
    damaged('mount records', err);
  }
  records.sort((a, b) => a.volumeId.localeCompare(b.volumeId) || a.path.localeCompare(b.path));

  const kernelMounts = readMounts();
  const kernel = kernelView(config.dataRoot, kernelMounts, loopDevices());
  const byId = new Map<string, VolumeRecord>(volumes.map((v) => [v.id, v]));
  const byHash = new Map<string, string>(volumes.map((v) => [volumeHandleHash(v.id), v.id]));
  const recordAt = new Map(records.map((r) => [r.path, r]));

  /** The directory a staging that is its record alone stands for (Backend.stagedDirectory), when `r` is one. */
  const stagedDirectoryOf = (r: MountRecord): string | undefined => {
    const volume = byId.get(r.volumeId);
    return volume && r.recordOnly ? backendFor(volume.backend).stagedDirectory?.(volume, core) : undefined;
  };
  const mounts: MountLine[] = records.map((r) => {
    const m = mountAt(r.path, kernelMounts);
    const from = stagedDirectoryOf(r);
    return { volumeId: r.volumeId, kind: r.kind, path: r.path, readonly: r.readonly, block: Boolean(r.block), implicit: Boolean(r.implicit), ...(m ? { mounted: `${m.fsType} ${m.source}` } : {}), ...(from ? { bindsFrom: from } : {}) };
  });

  for (const r of records) {
    const volume = byId.get(r.volumeId);
    if (!volume) {
      problems.push({ kind: 'record-of-unknown-volume', subject: r.path, volumeId: r.volumeId, detail: `a ${r.kind} record of volume ${r.volumeId}, which the catalog does not hold` });
      continue;
    }
    // A staging that is its record alone: nothing to find in the kernel.
    if (r.recordOnly) continue;
    if (r.kind === 'stage' && r.block) {
      const hasDevice = volume.backend !== 'block' || kernel.loops.some((l) => l.volumeId === r.volumeId);
      if (!hasDevice)
        problems.push({ kind: 'record-without-device', subject: r.path, volumeId: r.volumeId, detail: `a raw block staging of volume ${r.volumeId} whose loop device is gone (a reboot?): unstage it (kubelet's retry does)` });
      continue;
    }
    const m = mountAt(r.path, kernelMounts);
    if (!m) {
      problems.push({ kind: 'record-without-mount', subject: r.path, volumeId: r.volumeId, detail: `a ${r.kind} record of volume ${r.volumeId}, but nothing is mounted there (unmounted by hand, or a reboot): the next ${r.kind === 'stage' ? 'stage or unstage' : 'publish or unpublish'} repairs it` });
      continue;
    }
    const holds = kernel.volumeOfSource(m);
    if (holds && holds !== r.volumeId)
      problems.push({ kind: 'mount-of-another-volume', subject: r.path, volumeId: r.volumeId, detail: `recorded as volume ${r.volumeId}, but the mount there holds volume ${holds}` });
    const writable = r.kind === 'publish' && r.block && readsOnly(volume, config.nodeName, r.readonly, records.find((st) => st.kind === 'stage' && st.path === r.stagingPath && st.volumeId === r.volumeId)) ? writableLoopAt(r.path, r.volumeId, kernel.loops) : undefined;
    if (writable)
      problems.push({ kind: 'writable-read-only-publish', subject: r.path, volumeId: r.volumeId, detail: `a read-only raw block publish of volume ${r.volumeId} binds ${writable}, which takes writes (an older twinvol's publish): the pod can write the volume; restart the pod, whose new publish binds a read-only device` });
    const staging = r.kind === 'publish' ? records.find((st) => st.kind === 'stage' && st.path === r.stagingPath) : undefined;
    const missing = flagsLeftOff(backendFor(volume.backend), r, staging, m.mountOptions);
    if (missing.length)
      problems.push({ kind: 'mount-without-its-flags', subject: r.path, volumeId: r.volumeId, detail: `the ${r.kind === 'stage' ? 'staging' : 'publish'} of volume ${r.volumeId} was made ${missing.join(',')}, which its mount lacks (a call killed between a bind and its remount): ${r.kind === 'stage' ? 'stop the pods using it on this node, so that it is unstaged, and start them again' : 'restart the pod: its new publish makes the mount with them'}` });
  }

  if (recordsRead) {
    const dirs = { kubeletDir: config.kubeletDir, stateDir: config.stateDir, driverName: opts.csiDriverName ?? DEFAULT_CSI_DRIVER_NAME };
    const seen = new Set<string>();
    for (const m of kernelMounts) {
      if (seen.has(m.mountPoint) || recordAt.has(m.mountPoint)) continue;
      const where = twinvolPath(m.mountPoint, dirs);
      const ofSource = kernel.volumeOfSource(m);
      if (where?.what === 'scratch bind') {
        // One in flight (its process alive, or of another pid namespace) is no problem.
        if (await scratchOwnerGone(basename(m.mountPoint))) problems.push(strandedScratchBind(m, ofSource));
        continue;
      }
      if (!where && !ofSource) continue;
      const volumeId = ofSource ?? where?.volumeId ?? (where?.handleHash ? byHash.get(where.handleHash) : undefined);
      // A third-party FlexVolume driver's volume behind twinvol-csi: its driver made the mount, and keeps no twinvol record of it.
      const record = volumeId ? byId.get(volumeId) : undefined;
      if (record && isExecVolume(record)) continue;
      seen.add(m.mountPoint);
      const what = where ? `a ${where.what} path` : 'a path twinvol does not use';
      problems.push({
        kind: 'mount-without-record',
        subject: m.mountPoint,
        ...(volumeId ? { volumeId } : {}),
        detail: `${m.fsType} ${m.source} is mounted at ${what}${volumeId ? `, holding volume ${volumeId}` : ''}, with no twinvol record: twinvol never tears it down; unmount it if nothing uses it`,
      });
    }
  }

  const stagedHere = new Set(records.filter((r) => r.kind === 'stage').map((r) => r.volumeId));
  const loops: LoopLine[] = kernel.loops.map(({ loop, volumeId }) => ({ device: loop.device, backingFile: loop.backingFile, deleted: loop.deleted, readOnly: loop.readOnly, ...(volumeId ? { volumeId } : {}) }));
  for (const l of loops) {
    const volume = l.volumeId ? byId.get(l.volumeId) : undefined;
    // Bound and not yet mounted is FlexVolume's waitforattach before its mountdevice: the volume is attached here.
    const accounted = volume && !l.deleted && (stagedHere.has(volume.id) || volume.attachments.some((a) => a.node === config.nodeName));
    if (accounted || !recordsRead) continue;
    const why = l.deleted
      ? 'its image was deleted while the device held it'
      : !volume
        ? 'its backing file is not a volume the catalog holds'
        : `volume ${volume.id} is neither staged on this node nor attached to it`;
    problems.push({ kind: 'loop-without-record', subject: l.device, ...(l.volumeId ? { volumeId: l.volumeId } : {}), detail: `${l.device} is bound to ${l.backingFile}, but ${why}: losetup -d ${l.device} once nothing mounts it` });
  }

  const registered = new Set(nodes.map((n) => n.nodeId));
  for (const v of volumes)
    for (const a of v.attachments) {
      // An implicit attachment (a FlexVolume mount on an install without attach, a CSI inline volume) is
      // made by the node itself for its own staging, never by an attach that names the node and so
      // registers it (flex/verbs.ts attach): its node need not be registered.
      if (!registered.has(a.node) && !a.implicit)
        problems.push({ kind: 'attachment-to-unregistered-node', subject: a.node, volumeId: v.id, detail: `volume ${v.id} is attached to node ${a.node}, which is not registered: if that node is gone, twinvol volume release ${v.id} --node ${a.node} --force` });
      if (a.node === config.nodeName && a.inUse && recordsRead && !stagedHere.has(v.id))
        problems.push({ kind: 'staged-mark-without-staging', subject: a.node, volumeId: v.id, detail: `the catalog marks volume ${v.id} staged on this node, which has no staging of it (a reboot?): a detach would keep it fenced until an unstage of it runs here` });
    }

  problems.push(...(await staleFiles(core)));
  return {
    node: config.nodeName,
    dataRoot: config.dataRoot,
    stateDir: config.stateDir,
    kubeletDir: config.kubeletDir,
    volumes,
    nodes,
    mounts,
    loops,
    problems,
    consistent: problems.length === 0,
  };
}

/**
 * Locks whose holder is gone (shared/store/lock.ts judges) and record temporaries a killed writer left
 * (`<record>.<number>`: shared/store/json-record.ts writeRecord), older than a live writer's: the next holder of the lock
 * or writer of the record removes them, so they are only reported.
 */
async function staleFiles(core: Core): Promise<Problem[]> {
  const problems: Problem[] = [];
  const { dataRoot, stateDir } = core.config;
  for (const dir of [join(dataRoot, 'locks'), join(stateDir, 'locks')])
    for (const name of await names(dir)) {
      if (!name.endsWith('.lock') || !(await isAbandonedLock(join(dir, name)))) continue;
      problems.push({ kind: 'stale-lock', subject: join(dir, name), detail: 'a lock whose holder is gone: the next call that needs it takes it over' });
    }
  const recordDirs = [join(stateDir, 'mounts'), ...['nodes', 'pvs', 'groupsnapshots'].map((d) => join(dataRoot, d))];
  for (const entity of ['volumes', 'snapshots']) for (const id of await names(join(dataRoot, entity))) recordDirs.push(join(dataRoot, entity, id));
  for (const dir of recordDirs)
    for (const name of await names(dir)) {
      const record = /^(.+\.json)\.\d+$/.exec(name)?.[1];
      if (!record || !isRecordTemp(name, record)) continue;
      const st = await stat(join(dir, name)).catch(() => undefined);
      if (!st || Date.now() - st.mtimeMs < STALE_MS) continue;
      problems.push({ kind: 'stale-temp-file', subject: join(dir, name), detail: `a temporary copy of ${record} a killed writer left: ${dir.startsWith(stateDir) ? 'the unmount that removes that record removes it' : 'the next write of that record removes it'}` });
    }
  problems.push(...(await abandonedWork(core)));
  return problems;
}

/** Work a killed create or delete left in the catalog's `.work/` (Catalog.abandonedWork judges it). */
async function abandonedWork(core: Core): Promise<Problem[]> {
  return (await core.catalog.abandonedWork()).map((e) => ({
    kind: 'abandoned-work',
    subject: join(core.catalog.work.dir, e.name),
    detail: `the work of ${e.purpose === 'new' ? 'a create' : 'a delete'} of ${e.entity === 'volumes' ? 'volume' : 'snapshot'} ${e.id} that was killed: the next create or delete of it, or the CSI server's start, removes it`,
  }));
}

async function names(dir: string): Promise<string[]> {
  return (await readdir(dir).catch(() => [] as string[])).sort();
}

/** A bind a killed call left on its scratch mount point, never moved onto its target (shared/bind-by-move.ts). */
function strandedScratchBind(m: MountEntry, volumeId: string | undefined): Problem {
  return {
    kind: 'stranded-scratch-bind',
    subject: m.mountPoint,
    ...(volumeId ? { volumeId } : {}),
    detail: `${m.fsType} ${m.source}${volumeId ? `, holding volume ${volumeId},` : ''} is bound at a scratch mount point whose call was killed before it moved the bind onto its target (no pod sees it): the next read-only bind made without the one-step call, or twinvol-csi's start, undoes it; or umount it`,
  };
}
