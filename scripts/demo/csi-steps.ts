import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CsiCallError, type Message, PrivateCsi } from '../../flex/compare/csi-server.js';
import type { ScratchWorld as Scratch } from '../../flex/scratch-world.js';
import { printStep } from './report.js';

/**
 * The CSI server run as a DaemonSet would run it, and a gRPC client that prints each call: the
 * private server `twinvol compare` starts (flex/compare/csi-server.ts), with the demo's printing.
 */
export class CsiDriver {
  private constructor(
    private readonly server: PrivateCsi,
    readonly socket: string,
  ) {}

  /**
   * On `signal` (SIGINT, SIGTERM) the call waiting for an answer ends and no further one is made, so the
   * demo gets to its clean-up (which stops the server) at once.
   */
  static async start(bin: string, scratch: Scratch, nodeId: string, signal?: AbortSignal): Promise<CsiDriver> {
    const socket = join(scratch.root, 'csi/csi.sock');
    const started = performance.now();
    const server = await PrivateCsi.start({
      bin,
      socketPath: socket,
      nodeId,
      args: ['--data-root', scratch.dataRoot, '--state-dir', scratch.stateDir, '--kubelet-dir', scratch.kubeletDir],
      env: { PATH: '/usr/bin:/bin', TWINVOL_CONFIG: scratch.env.TWINVOL_CONFIG ?? '' },
      startMs: 15_000,
    });
    const cancel = () => server.cancel(signal?.reason instanceof Error ? signal.reason.message : 'interrupted', true);
    if (signal?.aborted) cancel();
    else signal?.addEventListener('abort', cancel, { once: true });
    printStep({ model: 'csi', call: 'start twinvol-csi, Probe', outcome: 'ready', ms: performance.now() - started, detail: `socket ${socket}` });
    return new CsiDriver(server, socket);
  }

  /** One RPC, printed with its status code; `expect` names a failure code the demo means to show. */
  async call(service: 'Identity' | 'Controller' | 'Node', method: string, req: Message, expect = 'OK', detail = ''): Promise<Message> {
    const started = performance.now();
    try {
      const res = await this.server.call(service, method, req);
      printStep({ model: 'csi', call: method, outcome: 'OK', ms: performance.now() - started, detail });
      if (expect !== 'OK') throw new Error(`${method} succeeded where ${expect} was expected`);
      return res;
    } catch (err) {
      if (!(err instanceof CsiCallError)) throw err;
      printStep({ model: 'csi', call: method, outcome: err.code, ms: performance.now() - started, detail: err.details });
      if (err.code !== expect) throw new Error(`${method} failed: ${err.code}: ${err.details}`);
      return {};
    }
  }

  async stop(): Promise<void> {
    await this.server.stop();
    printStep({ model: 'csi', call: 'SIGTERM twinvol-csi', outcome: existsSync(this.socket) ? 'socket left' : 'stopped', detail: 'socket removed' });
  }
}

/** A mount-access capability as the external-provisioner and kubelet send it. */
export function mountCapability(fsType: string): Message {
  return { mount: { fs_type: fsType, mount_flags: [] }, access_mode: { mode: 'SINGLE_NODE_WRITER' } };
}
