import { stat } from 'node:fs/promises';
import type { Core, VolumeRecord } from '../shared/index.js';
import type { VolumeCondition } from './messages.js';

const HEALTHY: VolumeCondition = { abnormal: false, message: 'volume is healthy' };

/**
 * The controller's view of a volume's health: is its backing data where the catalog says? One stat,
 * so ListVolumes stays cheap. (The node's view, whether it is still mounted, is in volumeStats.)
 */
export async function volumeCondition(core: Core, volume: VolumeRecord): Promise<VolumeCondition> {
  if (volume.backend === 'static') return { abnormal: false, message: 'static volume: its source is not watched by twinvol' };
  const path = volume.backend === 'block' ? core.catalog.imagePath(volume.id) : core.catalog.dataDir(volume.id);
  const st = await stat(path).catch(() => undefined);
  if (!st) return { abnormal: true, message: `the backing ${volume.backend === 'block' ? 'image' : 'directory'} of volume ${volume.id} is missing` };
  if (volume.backend === 'block' && st.size < volume.capacityBytes)
    return { abnormal: true, message: `the image of volume ${volume.id} is smaller (${st.size} bytes) than its capacity` };
  return HEALTHY;
}
