import { failedPrecondition } from '../errors.js';
import type { VolumeId } from '../validate.js';
import type { Core } from './core.js';

/*
 * FlexVolume's detach, and kubelet's calls for a volume it reconstructed, name a volume by one name
 * alone, kept in the catalog (pvs/<name>.json) by the calls that set it up. kubelet's name is the
 * spec's (pkg/volume/flexvolume plugin-defaults.go GetVolumeName): a PV's name, unique, but for an
 * inline volume the pod's own name for it ("data"), which any number of pods use. A name is not
 * pointed elsewhere while the volume it stands for still has an attachment that a detach must
 * release: that detach, naming only this name, would release the other volume and leave this one
 * attached for good (two pods' inline "data" volumes did so). Nearly every call finds the name
 * already its own, read without a lock.
 */

/** The attachment of the volume `pvName` stands for now, if that is another volume and a detach must still release it. */
async function heldElsewhere(core: Core, current: VolumeId | undefined, volumeId: VolumeId) {
  if (current === undefined || current === volumeId) return undefined;
  return (await core.catalog.getVolume(current))?.attachments.find((a) => !a.implicit);
}

/**
 * attach: makes `pvName` stand for `volumeId`, then runs `attachStep`, both under the name's lock
 * so that two attaches of one name cannot both find it free; refused, before anything is written,
 * while the name stands for another volume still attached.
 */
export async function attachUnderPvName<T>(core: Core, pvName: string, volumeId: VolumeId, attachStep: () => Promise<T>): Promise<T> {
  if ((await core.catalog.pvVolume(pvName)) === volumeId) return attachStep();
  return core.catalog.lock('pv', pvName, async () => {
    const current = await core.catalog.pvVolume(pvName);
    const held = await heldElsewhere(core, current, volumeId);
    if (held)
      throw failedPrecondition(
        `PV name ${pvName} stands for volume ${current}, still attached to node ${held.node}: FlexVolume's detach names a volume by this name alone, so volume ${volumeId} cannot take it until ${current} is detached (an inline volume: give it a name no other pod's twinvol volume uses)`,
      );
    // Before the attachment: a detach that comes after a crash between the two still finds the volume.
    if (current !== volumeId) await core.catalog.recordPv(pvName, volumeId);
    return attachStep();
  });
}

/** mountdevice, mount: makes `pvName` stand for `volumeId` unless it stands for another volume still attached, which keeps it. */
export async function rememberPvName(core: Core, pvName: string, volumeId: VolumeId): Promise<void> {
  const current = await core.catalog.pvVolume(pvName);
  if (current === volumeId || (await heldElsewhere(core, current, volumeId))) return;
  await core.catalog.recordPv(pvName, volumeId);
}
