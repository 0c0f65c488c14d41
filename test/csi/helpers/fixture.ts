import { afterAll, beforeAll, expect } from 'vitest';
import { registerNode } from '../../../shared/core/nodes.js';
import { nodeSegments } from '../../../shared/topology.js';
import { coreIn } from '../../shared/core-scratch.js';
import { type CsiClient, type ServiceCall, serviceCall } from './client.js';
import { BUILT_IN, type CsiFlavour, driverProcessesLeft } from './flavour.js';
import { createCsiScratch, type CsiScratch } from './scratch.js';
import { type LaunchOptions, launchCsi, type RunningCsi } from './server.js';
import { nid } from '../../helpers/ids.js';

export interface CsiSuite {
  readonly s: CsiScratch;
  /** Which server this is (test/csi/helpers/flavour.ts): built-in backends, or exec volumes of a FlexVolume driver. */
  readonly flavour: CsiFlavour;
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
 * An exec flavour's suite also fails if a driver process is left running, or a zombie of the server's.
 */
export function useCsiServer(options: LaunchOptions & { flavour?: CsiFlavour } = {}): CsiSuite {
  const { flavour = BUILT_IN, ...launch } = options;
  let scratch: CsiScratch | undefined;
  let running: RunningCsi | undefined;
  beforeAll(async () => {
    scratch = createCsiScratch(launch.nodeId ?? 'node-a');
    running = await launchCsi(scratch, flavour.launch(scratch, launch));
  });
  afterAll(async () => {
    const pluginDir = scratch && flavour.pluginDir?.(scratch);
    const zombies = pluginDir && running?.child.pid !== undefined ? driverProcessesLeft(pluginDir, running.child.pid) : [];
    await running?.stop();
    const left = pluginDir ? driverProcessesLeft(pluginDir) : [];
    scratch?.cleanup();
    expect([...zombies, ...left], 'FlexVolume driver processes left after the suite').toEqual([]);
  });
  const need = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('the CSI server fixture is not started (used outside a test?)');
    return v;
  };
  const client = () => need(running).client;
  return {
    flavour,
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
