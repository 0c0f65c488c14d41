import type { Config, Core, NodeId } from '../shared/index.js';
import type { Flags } from './flags.js';
import type { Rpc } from './rpc.js';
import type { ToolReport } from './tools.js';
import { VENDOR_VERSION } from './version.js';

export type Mode = 'controller' | 'node' | 'all';

/** Server-wide settings from the command line, fixed at start. */
export interface Settings {
  driverName: string;
  vendorVersion: string;
  mode: Mode;
  /** This node's id (NodeGetInfo) and the node name the core records attachments under. */
  nodeId: NodeId;
  /** 0: no limit. */
  maxVolumesPerNode: number;
}

/** What every service but Identity is built from: one core per server, one RPC wrapper. */
export interface ServiceContext {
  core: Core;
  rpc: Rpc;
  settings: Settings;
}

/**
 * What the Identity service is built from: no core, so that the CSI server's main thread answers
 * Probe itself while the core's work runs on the service thread (csi/service-thread.ts).
 */
export interface IdentityContext {
  config: Pick<Config, 'dataRootScope'>;
  rpc: Rpc;
  settings: Settings;
  tools: ToolReport;
  /** Why the server cannot serve now, if it cannot (csi/service-thread.ts `stalled`): Probe fails with it. */
  stalled?: () => string | undefined;
}

export const servesController = (mode: Mode) => mode !== 'node';
export const servesNode = (mode: Mode) => mode !== 'controller';

/** The settings the flags and config give: the main thread and the service thread build the same. */
export function settingsOf(flags: Pick<Flags, 'driverName' | 'mode' | 'maxVolumesPerNode'>, config: Pick<Config, 'nodeName'>): Settings {
  return { driverName: flags.driverName, vendorVersion: VENDOR_VERSION, mode: flags.mode, nodeId: config.nodeName, maxVolumesPerNode: flags.maxVolumesPerNode };
}
