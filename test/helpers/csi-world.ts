import { afterEach } from 'vitest';
import { type ServiceCall, serviceCall } from '../csi/helpers/client.js';
import { createCsiScratch, type CsiScratch } from '../csi/helpers/scratch.js';
import { launchCsi, type RunningCsi } from '../csi/helpers/server.js';
import { type FlexResult, runFlex } from './flex-runner.js';

/** One node seen through both front ends: a CSI server and FlexVolume calls on the same scratch world. */
export interface World {
  s: CsiScratch;
  server: RunningCsi;
  ctl: ServiceCall<'Controller'>;
  node: ServiceCall<'Node'>;
  /** A FlexVolume call in the same world, with the same PATH as the server. */
  flex(...argv: string[]): Promise<FlexResult>;
}

/**
 * A fresh world per test, made by the function returned: `prepare` runs on the scratch before the
 * server starts (a small filesystem mounted, a tool wrapped), and a directory it returns goes first on
 * the PATH of the server and of every FlexVolume call; as `{ path, env }`, `env` is added to both
 * environments too. afterEach stops the server, then unmounts, detaches and removes everything below
 * the scratch root, whether the test passed or not.
 */
export function useCsiWorld(): (prepare?: (s: CsiScratch) => string | { path: string; env: Record<string, string> } | void) => Promise<World> {
  let scratch: CsiScratch | undefined;
  let server: RunningCsi | undefined;
  afterEach(async () => {
    try {
      await server?.stop();
    } finally {
      scratch?.cleanup();
      scratch = server = undefined;
    }
  });
  return async (prepare) => {
    const s = (scratch = createCsiScratch('node-a'));
    const made = prepare?.(s);
    const { path, env: extra } = typeof made === 'string' ? { path: made, env: {} } : (made ?? { path: undefined, env: {} });
    const env: Record<string, string> = { ...(path ? { PATH: `${path}:/usr/bin:/bin` } : {}), ...extra };
    const running = (server = await launchCsi(s, { env }));
    return {
      s,
      server: running,
      ctl: serviceCall(() => running.client, 'Controller'),
      node: serviceCall(() => running.client, 'Node'),
      flex: (...argv) => runFlex({ ...s.env, ...env }, argv),
    };
  };
}
