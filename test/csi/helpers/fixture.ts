import { afterAll, beforeAll } from 'vitest';
import { registerNode } from '../../../shared/core/nodes.js';
import { nodeSegments } from '../../../shared/topology.js';
import { coreIn } from '../../shared/core-scratch.js';
import { type CsiClient, type ServiceCall, serviceCall } from './client.js';
import { createCsiScratch, type CsiScratch } from './scratch.js';
import { type LaunchOptions, launchCsi, type RunningCsi } from './server.js';
import { nid } from '../../helpers/ids.js';

export interface CsiSuite {
  readonly s: CsiScratch;
  readonly server: RunningCsi;
  readonly client: CsiClient;
  identity: ServiceCall<'Identity'>;
  ctl: ServiceCall<'Controller'>;
  node: ServiceCall<'Node'>;
  /**
   * Makes other nodes known to the catalog, as their node servers would as they start
   * (shared/core/nodes.ts): ControllerPublishVolume to a node that never registered is NOT_FOUND.
   */
  registerNodes(...ids: string[]): Promise<void>;
}

/**
 * One scratch world and one running server for a test file. afterAll stops the server first (so it
 * holds nothing), then unmounts, detaches and deletes everything, whether the tests passed or not.
 */
export function useCsiServer(options: LaunchOptions = {}): CsiSuite {
  let scratch: CsiScratch | undefined;
  let running: RunningCsi | undefined;
  beforeAll(async () => {
    scratch = createCsiScratch(options.nodeId ?? 'node-a');
    running = await launchCsi(scratch, options);
  });
  afterAll(async () => {
    await running?.stop();
    scratch?.cleanup();
  });
  const need = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('the CSI server fixture is not started (used outside a test?)');
    return v;
  };
  const client = () => need(running).client;
  return {
    identity: serviceCall(client, 'Identity'),
    ctl: serviceCall(client, 'Controller'),
    node: serviceCall(client, 'Node'),
    get s() {
      return need(scratch);
    },
    get server() {
      return need(running);
    },
    async registerNodes(...ids) {
      const core = coreIn(need(scratch));
      for (const id of ids) await registerNode(core, nid(id), nodeSegments(id), 'csi');
    },
    get client() {
      return need(running).client;
    },
  };
}
