import { join } from 'node:path';
import type { BackendContext } from '../backends/backend.js';
import type { Config } from '../config.js';
import { isoNow } from '../iso-time.js';
import { Mounter } from '../mounter.js';
import { Catalog } from '../store/catalog.js';
import { NetworkCatalog } from '../store/network-catalog.js';
import { NodeState } from '../store/node-state.js';

/** Everything a verb needs; both front ends open one per process (FlexVolume) or per server (CSI). */
export interface Core extends BackendContext {
  nodeState: NodeState;
}

/**
 * `ports`: what only the CSI server has to hand in (the FlexVolume driver caller, shared/backends/
 * exec-volumes.ts), so that the core, and so the FlexVolume executable, never imports it.
 */
export function openCore(config: Config, ports: Pick<BackendContext, 'flex'> = {}): Core {
  return {
    ...ports,
    config,
    catalog: config.dataRootOnNetwork ? new NetworkCatalog(config.dataRoot) : new Catalog(config.dataRoot),
    nodeState: new NodeState(config.stateDir),
    mounter: new Mounter(config.commandTimeoutMs, config.dataCommandTimeoutMs, config.stateDir),
  };
}

/** Where twinvol stages a volume itself for callers that have no stage step of their own. */
export function implicitStagingPath(core: Core, volumeId: string): string {
  return join(core.config.stateDir, 'staging', volumeId);
}

/** A record's time stamp (shared/iso-time.ts says why not toISOString). */
export function now(): string {
  return isoNow();
}
