import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { backendTraits, type Core, EXEC_BACKEND, execVolumeOfRecord, isExecVolume, isValidPvName, mountsOf, notFound, parseDriverName, readMounts, type VolumeId, type VolumeRecord } from '../../shared/index.js';
import type { CsiSubject } from './verify-csi.js';
import type { FlexSubject } from './verify-flex.js';
import type { FlexPv } from './verify-pv.js';

/**
 * Which volume `twinvol migrate verify` is about, and how each model reaches it: a twinvol volume
 * through this executable's own verbs and the CSI server's built-in backends, an exec volume through
 * its third-party driver in the plugin dir and the CSI server's exec backend (the static PV that
 * `twinvol migrate plan` writes for it: backend exec, the driver, its options).
 */
export interface Subject {
  volumeId: VolumeId;
  kind: 'twinvol' | 'exec';
  /** block, dir, static or exec. */
  backend: string;
  flex: FlexSubject;
  csi: CsiSubject;
  /** The device's bytes are compared too (block volumes: read-only mounts leave them as they are). */
  sumDevice: boolean;
  /** The catalog held the volume before verify: an exec volume the CSI server registered is forgotten after. */
  registered: boolean;
  /** The PV name is verify's own (no --pv): its record in the catalog is forgotten after. */
  inventedPv: boolean;
  notes: string[];
}

/** A problem with what was asked, not with the volume: exit 2, nothing touched. */
export class InputError extends Error {}

export function resolveSubject(core: Core, volumeId: VolumeId, record: VolumeRecord | undefined, pv: FlexPv | undefined, o: { self: string; pluginDir: string; vendor: string }): Subject {
  const notes: string[] = [];
  if (pv?.readOnly === false) notes.push(`PV ${pv.name} is read-write; verify mounts it read-only in both models, so nothing it checks is changed`);
  if (pv?.secretRef) notes.push(`PV ${pv.name} names secret ${pv.secretRef}: verify talks to no cluster, so the driver gets no kubernetes.io/secret/* options`);
  let driverName = `${o.vendor}/twinvol`;
  if (pv) {
    try {
      driverName = parseDriverName(pv.driver, `PersistentVolume ${pv.name}: spec.flexVolume.driver`).full;
    } catch (err) {
      throw new InputError(err instanceof Error ? err.message : String(err));
    }
  }
  const driver = parseDriverName(driverName);
  const exec = pv ? driver.name !== 'twinvol' : record !== undefined && isExecVolume(record);
  // Without --pv, a twinvol volume gets a PV name of verify's own: twinvol's attach records which
  // volume a PV name stands for (flex/verbs.ts rememberPv), and a real PV that happened to be named
  // like this volume must keep its record. The sweep forgets it again (flex/migrate/verify.ts).
  // An exec volume's driver sees the name its CSI PV will give it: the volume id.
  const invented = !pv && !exec;
  const pvName = pv?.name ?? (invented ? `twinvol-verify-${createHash('sha256').update(volumeId).digest('hex').slice(0, 16)}` : isValidPvName(volumeId) ? volumeId : 'twinvol-verify');
  if (!exec) {
    // The volume the PV names as twinvol's executable finds it (flex/options.ts volumeIdOf): the
    // volumeId option, else the PV's name; `migrate plan` gives such a PV that name as volumeHandle.
    const named = pv ? pv.options.volumeId || pv.name : volumeId;
    if (named !== volumeId)
      throw new InputError(`PersistentVolume ${pv?.name ?? ''} names volume ${JSON.stringify(named)} (${pv?.options.volumeId ? 'spec.flexVolume.options.volumeId' : 'no volumeId option: its own name'}), not the volume ${volumeId} asked for`);
    if (!record) throw notFound(`volume ${volumeId} does not exist in the catalog at ${core.config.dataRoot} (an exec volume of another driver: give its PV with --pv FILE)`);
    const fsType = pv?.fsType || record.fsType;
    const traits = backendTraits(record.backend);
    return {
      volumeId,
      kind: 'twinvol',
      backend: record.backend,
      flex: { file: o.self, volume: { id: pvName, driver, options: { ...(pv?.options ?? {}), volumeId }, fsType } },
      csi: { volumeId, pvName, fsType: traits.hasFilesystemType ? record.fsType : '', multiNode: record.access === 'multi-node', context: {} },
      sumDevice: traits.hasDevice,
      registered: true,
      inventedPv: invented,
      notes,
    };
  }
  const volume = pv ? { id: pvName, driver, options: pv.options, fsType: pv.fsType } : { ...execVolumeOfRecord(record as VolumeRecord), id: pvName };
  const file = join(o.pluginDir, `${volume.driver.vendor}~${volume.driver.name}`, volume.driver.name);
  if (!existsSync(file)) throw notFound(`FlexVolume driver ${volume.driver.full} is not installed on this node: no ${file} (--plugin-dir names kubelet's --volume-plugin-dir)`);
  const context = { ...volume.options, backend: EXEC_BACKEND, driver: volume.driver.full, ...(volume.fsType ? { fsType: volume.fsType } : {}) };
  return {
    volumeId,
    kind: 'exec',
    backend: EXEC_BACKEND,
    flex: { file, volume },
    csi: { volumeId, pvName, fsType: volume.fsType, multiNode: false, context },
    sumDevice: false,
    registered: record !== undefined,
    inventedPv: false,
    notes,
  };
}

/**
 * Why the volume is in use, or undefined: an attachment to any node (the catalog is cluster-wide), a
 * staging or publication twinvol recorded on this node, or anything mounted at kubelet's paths for
 * this PV or volume (the only sign of an exec volume a third-party driver mounted for kubelet).
 */
export async function inUse(core: Core, s: Subject, record: VolumeRecord | undefined): Promise<string | undefined> {
  if (record?.attachments.length) {
    const where = record.attachments.map((a) => (a.fenced ? `${a.node} (detached, still staged)` : a.node)).join(', ');
    return `volume ${s.volumeId} is attached to ${where}: stop what uses it first (verify needs it to itself)`;
  }
  if (record) {
    const mounts = await mountsOf(core, record.id);
    if (mounts.length) return `volume ${s.volumeId} is ${mounts[0]?.kind === 'stage' ? 'staged' : 'published'} on this node at ${mounts.map((m) => m.path).join(', ')}: stop what uses it first`;
  }
  const { vendor, name } = s.flex.volume.driver;
  const pv = s.flex.volume.id;
  const kubelet = core.config.kubeletDir;
  const hers = readMounts()
    .map((m) => m.mountPoint)
    .filter((p) => p.startsWith(`${kubelet}/`))
    .filter((p) => p.endsWith(`/${vendor}~${name}/${pv}`) || p.endsWith(`/flexvolume/${vendor}/${name}/mounts/${pv}`) || p.endsWith(`/kubernetes.io~csi/${pv}/mount`));
  if (hers.length) return `volume ${s.volumeId} is mounted on this node at ${hers.join(', ')}: stop what uses it first`;
  return undefined;
}
