import { join } from 'node:path';
import type { BackendContext } from '../backends/backend.js';
import type { Config } from '../config.js';
import { Mounter } from '../mounter.js';
import { Catalog } from '../store/catalog.js';
import { NodeState } from '../store/node-state.js';

/** Everything a verb needs; both front ends open one per process (FlexVolume) or per server (CSI). */
export interface Core extends BackendContext {
  nodeState: NodeState;
}

export function openCore(config: Config): Core {
  return {
    config,
    catalog: new Catalog(config.dataRoot),
    nodeState: new NodeState(config.stateDir),
    mounter: new Mounter(config.commandTimeoutMs),
  };
}

/** Where twinvol stages a volume itself for callers that have no stage step of their own. */
export function implicitStagingPath(core: Core, volumeId: string): string {
  return join(core.config.stateDir, 'staging', volumeId);
}

export function now(): string {
  return new Date().toISOString();
}
