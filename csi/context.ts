import type { Core, NodeId } from '../shared/index.js';
import type { Rpc } from './rpc.js';
import type { ToolReport } from './tools.js';

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

/** What every service is built from: one core per server, one RPC wrapper, the start-up tool check. */
export interface ServiceContext {
  core: Core;
  rpc: Rpc;
  settings: Settings;
  tools: ToolReport;
}

export const servesController = (mode: Mode) => mode !== 'node';
export const servesNode = (mode: Mode) => mode !== 'controller';
