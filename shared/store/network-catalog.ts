import { unavailable } from '../errors.js';
import { Catalog } from './catalog.js';
import type { LockOptions } from './lock.js';
import { notOnNetwork } from './filesystem.js';

/**
 * The catalog of a data root that must lie on a network filesystem (setting dataRootOnNetwork): every
 * change to it first asks the kernel what the data root lies on. Where the filesystem is not mounted
 * (a node booted before its NFS mount came up, a share unmounted under a running server), the
 * directory beneath is an empty catalog, and without this check a DeleteVolume of any volume there
 * answered "already deleted" (the CO then forgets the PV while the data stays on the share), and a
 * CreateVolume made its volume on this host's disk, where no other node sees it. Every change takes
 * an entry's lock (shared/store/catalog.ts), so the check sits there: one statfs a change. Reads are
 * left as they are; what they miss is a NotFound the caller retries, not a change.
 */
export class NetworkCatalog extends Catalog {
  override async lock<T>(entity: 'volume' | 'snapshot' | 'pv' | 'node' | 'group', id: string, fn: () => Promise<T>, options?: LockOptions): Promise<T> {
    const on = await notOnNetwork(this.root);
    if (on !== undefined)
      throw unavailable(`the data root ${this.root} lies on ${on}, and setting dataRootOnNetwork says it is a network filesystem: is that filesystem mounted on this node? Nothing was changed`);
    return super.lock(entity, id, fn, options);
  }
}
