import { join } from 'node:path';
import { afterEach, beforeEach, expect } from 'vitest';
import { shQuote } from '../../flex/shell-quote.js';
import { outcome } from '../csi/helpers/client.js';
import { createCsiScratch, type CsiScratch } from '../csi/helpers/scratch.js';
import { launchCsi, type RunningCsi } from '../csi/helpers/server.js';
import { killStalled, type StallingTool, untilStalled } from './stalling-tool.js';
import { wrappedTool } from './tool-wrapper.js';

export interface KillableServers {
  /** Starts a CSI server on the test's scratch world, stopped after the test whatever happened. */
  launch(env?: NodeJS.ProcessEnv): Promise<RunningCsi>;
  /** `tool` stopping (until killed) on a call with an argument matching the shell pattern `pattern`. */
  stallOn(tool: string, pattern: string): StallingTool;
  /** A stall made elsewhere (test/helpers/stalling-tool.ts), killed after the test. */
  track(stall: StallingTool): StallingTool;
  /**
   * Runs `call` on a server whose PATH finds the stall's tool first (and `env` beside), and kills the
   * server (SIGKILL) once the call has reached the stall, as a node dying there would: the call's
   * answer, which cannot have been OK, once the server is gone.
   */
  killedAt(stall: StallingTool, call: (server: RunningCsi) => Promise<unknown>, env?: NodeJS.ProcessEnv): Promise<void>;
}

/**
 * A scratch world per test for the crash suites, which kill servers at a stalled tool and start
 * others: after each test the stalls are killed, the servers stopped and the world removed, whether
 * the test passed or not. `onScratch` is given each test's world.
 */
export function useKillableServers(onScratch: (s: CsiScratch) => void, nodeId = 'node-a'): KillableServers {
  let scratch: CsiScratch | undefined;
  const servers: RunningCsi[] = [];
  const stalls: StallingTool[] = [];
  beforeEach(() => {
    scratch = createCsiScratch(nodeId);
    onScratch(scratch);
  });
  afterEach(async () => {
    for (const stall of stalls.splice(0)) killStalled(stall);
    for (const server of servers.splice(0)) await server.stop();
    scratch?.cleanup();
  });
  const world = () => {
    if (!scratch) throw new Error('the crash world is not set up (used outside a test?)');
    return scratch;
  };
  const track = (stall: StallingTool) => (stalls.push(stall), stall);
  return {
    async launch(env) {
      const server = await launchCsi(world(), { env });
      servers.push(server);
      return server;
    },
    stallOn(tool, pattern) {
      const marker = join(world().root, `${tool}-stalled`);
      const { dir } = wrappedTool(world().root, tool, `for a in "$@"; do case "$a" in ${pattern}) echo $$ > ${shQuote(marker)}; exec sleep 60;; esac; done`);
      return track({ dir, marker });
    },
    track,
    async killedAt(stall, call, env = {}) {
      const server = await this.launch({ PATH: `${stall.dir}:/usr/sbin:/usr/bin:/sbin:/bin`, ...env });
      const reply = outcome(call(server));
      try {
        await untilStalled(stall, 'the call');
      } finally {
        server.child.kill('SIGKILL');
        killStalled(stall);
      }
      expect((await reply).code).not.toBe('OK');
      await server.stop();
    },
  };
}
