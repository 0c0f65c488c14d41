import { loadConfig } from '../../shared/config.js';
import { type Core, openCore } from '../../shared/core/core.js';
import { afterEach, beforeEach } from 'vitest';
import { createScratch, type Scratch } from '../helpers/scratch.js';

/** A real Core whose data root, node state and kubelet dir all lie in one scratch dir. */
export function coreIn(s: Scratch, nodeName = 'node-a'): Core {
  // The scratch's empty config file keeps a machine-wide /etc/twinvol/config.json out of the test.
  return openCore(
    loadConfig({ TWINVOL_CONFIG: s.env.TWINVOL_CONFIG }, { dataRoot: s.dataRoot, stateDir: s.stateDir, kubeletDir: s.kubeletDir, nodeName }),
  );
}

/**
 * A fresh scratch and core for every test of a file, cleaned up after each (unmounting and detaching
 * what the test left). `set` hands them to the file's own variables.
 */
export function useScratchCore(set: (s: Scratch, core: Core) => void, nodeName = 'node-a'): void {
  let current: Scratch | undefined;
  beforeEach(() => {
    current = createScratch(nodeName);
    set(current, coreIn(current, nodeName));
  });
  afterEach(() => current?.cleanup());
}
