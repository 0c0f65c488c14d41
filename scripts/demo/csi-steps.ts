import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { credentials, loadPackageDefinition, type ServiceClientConstructor, type ServiceError, status } from '@grpc/grpc-js';
import { packageDefinitionFromText } from '../../csi/definition.js';
import protoText from '../../csi/proto/csi.proto';
import type { Scratch } from '../../test/helpers/scratch.js';
import { printStep } from './report.js';

type Message = Record<string, unknown>;
type Unary = (req: Message, cb: (err: ServiceError | null, res: Message) => void) => void;

/** The CSI server run as a DaemonSet would run it, and a gRPC client that prints each call. */
export class CsiDriver {
  private readonly clients = new Map<string, Record<string, Unary>>();

  private constructor(
    private readonly server: ChildProcess,
    readonly socket: string,
  ) {}

  static async start(bin: string, scratch: Scratch, nodeId: string): Promise<CsiDriver> {
    const socket = join(scratch.root, 'csi/csi.sock');
    const args = ['--endpoint', `unix://${socket}`, '--node-id', nodeId, '--data-root', scratch.dataRoot, '--state-dir', scratch.stateDir, '--kubelet-dir', scratch.kubeletDir];
    // The server logs one JSON line per RPC on stderr; the demo keeps its own output readable.
    const server = spawn(bin, args, { stdio: ['ignore', 'ignore', 'ignore'], env: { PATH: '/usr/bin:/bin', TWINVOL_CONFIG: scratch.env.TWINVOL_CONFIG ?? '' } });
    const driver = new CsiDriver(server, socket);
    const started = performance.now();
    for (;;) {
      if (server.exitCode !== null) throw new Error(`twinvol-csi exited with ${server.exitCode} at start`);
      if (existsSync(socket)) {
        const probe = await driver.raw('Identity', 'Probe', {}).catch(() => undefined);
        if (probe && (probe.ready as { value?: boolean } | undefined)?.value) break;
      }
      if (performance.now() - started > 15_000) throw new Error('twinvol-csi did not become ready in 15 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    printStep({ model: 'csi', call: 'start twinvol-csi, Probe', outcome: 'ready', ms: performance.now() - started, detail: `socket ${socket}` });
    return driver;
  }

  private client(service: string): Record<string, Unary> {
    let c = this.clients.get(service);
    if (!c) {
      const pkg = loadPackageDefinition(packageDefinitionFromText(protoText)) as unknown as { csi: { v1: Record<string, ServiceClientConstructor> } };
      const ctor = pkg.csi.v1[service];
      if (!ctor) throw new Error(`no CSI service ${service}`);
      c = new ctor(`unix://${this.socket}`, credentials.createInsecure()) as unknown as Record<string, Unary>;
      this.clients.set(service, c);
    }
    return c;
  }

  private raw(service: string, method: string, req: Message): Promise<Message> {
    const client = this.client(service);
    const fn = client[method];
    if (!fn) throw new Error(`no method ${method}`);
    return new Promise((done, fail) => fn.call(client, req, (err, res) => (err ? fail(err) : done(res))));
  }

  /** One RPC, printed with its status code; `expect` names a failure code the demo means to show. */
  async call(service: string, method: string, req: Message, expect: keyof typeof status = 'OK', detail = ''): Promise<Message> {
    const started = performance.now();
    try {
      const res = await this.raw(service, method, req);
      printStep({ model: 'csi', call: method, outcome: 'OK', ms: performance.now() - started, detail });
      if (expect !== 'OK') throw new Error(`${method} succeeded where ${expect} was expected`);
      return res;
    } catch (err) {
      const e = err as ServiceError;
      if (typeof e.code !== 'number') throw err;
      const code = status[e.code] as string;
      printStep({ model: 'csi', call: method, outcome: code, ms: performance.now() - started, detail: e.details });
      if (code !== expect) throw new Error(`${method} failed: ${code}: ${e.details}`);
      return {};
    }
  }

  async stop(): Promise<void> {
    for (const c of this.clients.values()) (c as unknown as { close(): void }).close();
    if (this.server.exitCode !== null) return;
    const exited = new Promise((r) => this.server.once('exit', r));
    this.server.kill('SIGTERM');
    await exited;
    printStep({ model: 'csi', call: 'SIGTERM twinvol-csi', outcome: existsSync(this.socket) ? 'socket left' : 'stopped', detail: 'socket removed' });
  }
}

/** A mount-access capability as the external-provisioner and kubelet send it. */
export function mountCapability(fsType: string): Message {
  return { mount: { fs_type: fsType, mount_flags: [] }, access_mode: { mode: 'SINGLE_NODE_WRITER' } };
}
