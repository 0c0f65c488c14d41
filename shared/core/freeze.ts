import { backendFor } from '../backends/index.js';
import { internal } from '../errors.js';
import type { MountRecord, VolumeRecord } from '../model.js';
import { isMountPoint } from '../mountinfo.js';
import type { Core } from './core.js';

/**
 * Runs `cut` with the filesystems of `volumes` that are staged on this node frozen, and thaws every one
 * of them afterwards, whether `cut` succeeded or not (and thaws those already frozen when a later freeze
 * fails). Only filesystems twinvol made on the volume's own device are frozen (the backend's
 * `makesFilesystem`): a dir volume is a directory of the data root's filesystem, and freezing that
 * would stop the very copy being cut. Volumes staged on other nodes, or not at all, are copied as they
 * are: crash-consistent, like a single snapshot (docs/architecture.md).
 */
export async function withFrozen<T>(core: Core, volumes: readonly VolumeRecord[], cut: () => Promise<T>): Promise<T> {
  const frozen: MountRecord[] = [];
  try {
    for (const staging of await stagingsToFreeze(core, volumes)) {
      // The marker comes first: a process killed between freeze and thaw leaves it for the next start.
      await core.nodeState.markFrozen(staging);
      frozen.push(staging);
      await core.mounter.freeze(staging.path);
    }
    return await cut();
  } finally {
    await thawAll(core, frozen);
  }
}

async function stagingsToFreeze(core: Core, volumes: readonly VolumeRecord[]): Promise<MountRecord[]> {
  const out: MountRecord[] = [];
  for (const volume of volumes) {
    if (!backendFor(volume.backend).makesFilesystem) continue;
    const stagings = (await core.nodeState.listForVolume(volume.id)).filter((r) => r.kind === 'stage' && !r.block);
    // One filesystem is mounted once per node (shared/core/staging.ts): the first live staging is it.
    const live = stagings.find((r) => isMountPoint(r.path));
    if (live) out.push(live);
  }
  return out;
}

/**
 * Thaws each staging and removes its marker; a thaw that fails keeps its marker (the next start tries
 * again) and is reported after the others were tried.
 */
async function thawAll(core: Core, frozen: readonly MountRecord[]): Promise<void> {
  const failed: string[] = [];
  for (const staging of frozen) {
    try {
      await thawIfFrozen(core, staging.path);
      await core.nodeState.unmarkFrozen(staging);
    } catch (err) {
      failed.push(`${staging.path}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (failed.length) throw internal(`could not thaw ${failed.join('; ')}; thaw by hand with fsfreeze --unfreeze`);
}

/** fsfreeze answers EINVAL ("Invalid argument") for a filesystem that is not frozen: already thawed. */
async function thawIfFrozen(core: Core, path: string): Promise<void> {
  try {
    await core.mounter.thaw(path);
  } catch (err) {
    if (!/Invalid argument/.test(err instanceof Error ? err.message : String(err))) throw err;
  }
}

/**
 * Thaws what a killed process left frozen (its markers), at a server's start: until then every writer
 * to that filesystem on this node hangs. Returns the paths thawed.
 */
export async function thawAbandonedFreezes(core: Core): Promise<string[]> {
  const thawed: string[] = [];
  for (const { record, clear } of await core.nodeState.frozen()) {
    if (record && isMountPoint(record.path)) {
      await thawIfFrozen(core, record.path);
      thawed.push(record.path);
    }
    await clear();
  }
  return thawed;
}
