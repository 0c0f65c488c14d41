import { statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { DescribedVolume } from '../backends/backend.js';
import { backendFor } from '../backends/index.js';
import { errnoCode, TwinvolError } from '../errors.js';
import type { AccessRequest, BackendKind } from '../model.js';
import type { Segments } from '../topology.js';
import { validateStringMap } from '../validate.js';
import { accessMismatch, fsTypeOfUses, scopeOfUses } from './access.js';
import type { Core } from './core.js';
import { reachableHere } from './placement.js';

/** What a caller asks the capacity for (CSI GetCapacity): volumes of a class, for some uses, somewhere. */
export interface CapacityQuery {
  backend: BackendKind;
  /** The class's own description (StorageClass parameters), checked as a create checks it. */
  described: DescribedVolume;
  /** The uses every volume must serve (CSI volume_capabilities); none: any. */
  requests: readonly AccessRequest[];
  /** Where the volumes must be reachable from (CSI accessible_topology). */
  topology?: Segments;
}

/**
 * The bytes volumes of the query can still be made of: the free space of the data root's filesystem,
 * or 0 where no such volume can be made at all (uses the class cannot serve, a topology no volume made
 * here is in), so a CO never places a volume on storage that would refuse it. A class a create would
 * refuse is InvalidArgument, as the create would be.
 */
export async function availableCapacity(core: Core, query: CapacityQuery): Promise<number> {
  backendFor(query.backend).describe(query.described, core.config);
  const topology = query.topology && validateStringMap(query.topology, 'accessible_topology segments', 4096);
  if (!servable(core, query) || !reachableHere(core, topology)) return 0;
  return freeBytes(core.config.dataRoot);
}

/**
 * Whether one volume of the class can serve every use asked, by the rules a create holds a new volume
 * to: its filesystem type as a create chooses it (fsTypeOfUses), its scope (scopeOfUses), and each
 * use against the volume (accessMismatch). What a create would refuse for the uses is 0 here, not an
 * error: GetCapacity asks how much, and of these there is none.
 */
function servable(core: Core, query: CapacityQuery): boolean {
  const backend = backendFor(query.backend);
  let fsType: string;
  try {
    const chosen = backend.makesFilesystem ? fsTypeOfUses(query.described.fsType, query.requests) : query.described.fsType;
    fsType = backend.describe({ ...query.described, fsType: chosen }, core.config).fsType;
  } catch (err) {
    // The class passed on its own (availableCapacity): only the type the uses chose can fail here.
    if (err instanceof TwinvolError && err.code === 'InvalidArgument') return false;
    throw err;
  }
  const shape = { id: 'a new volume', backend: query.backend, fsType, access: scopeOfUses(query.requests) } as const;
  return query.requests.every((r) => accessMismatch(shape, r) === undefined);
}

/** Free bytes of the filesystem holding the data root (or of its nearest existing ancestor, before first use). */
async function freeBytes(path: string): Promise<number> {
  for (let p = path; ; p = dirname(p)) {
    try {
      const st = await statfs(p);
      return st.bavail * st.bsize;
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT' || p === '/') throw err;
    }
  }
}
