import { join } from 'node:path';
import { createScratch, loopsUnder, mountsUnder, releaseUnder, type Scratch } from '../../helpers/scratch.js';

/** A private world for one suite's CSI server: the common scratch world plus the server's socket. */
export interface CsiScratch extends Scratch {
  socketPath: string;
  /** An empty TWINVOL_CONFIG, so the machine's /etc/twinvol never leaks in. */
  configPath: string;
}

export function createCsiScratch(nodeId: string): CsiScratch {
  const s = createScratch(nodeId, '/tmp/twinvol-csi-test-');
  return { ...s, socketPath: join(s.root, 'plugin/csi.sock'), configPath: join(s.root, 'config.json') };
}

export { loopsUnder as loopsBelow, mountsUnder as mountsBelow, releaseUnder as releaseAll };
