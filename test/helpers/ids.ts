import { type NodeId, type SnapshotId, validateNodeName, validateSnapshotId, validateVolumeId, type VolumeId } from '../../shared/validate.js';

// Tests name ids as literals; the core's verbs take branded ids (shared/validate.ts), minted by the
// same checks a front end runs, so a test cannot hand a verb something a front end could not.
export const vid = (id: string): VolumeId => validateVolumeId(id);
export const nid = (name: string): NodeId => validateNodeName(name);
export const sid = (id: string): SnapshotId => validateSnapshotId(id);

/**
 * An id that skipped its check, for tests of the core's own guard: a JavaScript caller (or a front end
 * with a bug) could still hand a verb any string, and the verb must refuse it before touching the disk.
 */
export const unchecked = <T extends VolumeId | NodeId | SnapshotId>(value: string): T => value as T;
