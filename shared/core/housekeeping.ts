import type { Core } from './core.js';

export interface SweepReport {
  /** Work entries removed: `<purpose>@<entity>@<id>@<hex>` names under the data root's .work/. */
  removed: string[];
  /** Left for a live owner (or a crashed holder's lock that is not stale yet): the next create sweeps them. */
  busy: string[];
  /** Names in .work/ this version did not make; left alone for an administrator to look at. */
  foreign: string[];
}

/**
 * Removes the partial copies crashed creates, snapshots and deletes left in the data root's work
 * area. A server runs it when it starts; every create runs the same sweep (shared/store/catalog.ts
 * createEntry), so work is reclaimed even where no server restarts.
 */
export async function sweepAbandonedWork(core: Core): Promise<SweepReport> {
  const { removed, busy, foreign } = await core.catalog.sweepAbandoned();
  return { removed: removed.map((e) => e.name), busy: busy.map((e) => e.name), foreign };
}
