import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type Client, credentials, loadPackageDefinition, type ServiceClientConstructor, type ServiceError, status } from '@grpc/grpc-js';
import { packageDefinitionFromText } from '../../csi/definition.js';
import type { ControllerPublishVolumeRequest } from '../../csi/generated/csi/v1/ControllerPublishVolumeRequest.js';
import type { NodePublishVolumeRequest } from '../../csi/generated/csi/v1/NodePublishVolumeRequest.js';
import type { NodeStageVolumeRequest } from '../../csi/generated/csi/v1/NodeStageVolumeRequest.js';
import type { VolumeCapability } from '../../csi/generated/csi/v1/VolumeCapability.js';
import protoText from '../../csi/proto/csi.proto';
import { type Config, readMounts } from '../../shared/index.js';
import { type Brought, mounted } from './verify-flex.js';
import type { Recorder } from './verify-report.js';

/**
 * The CSI half of `twinvol migrate verify`: the volume brought up through a CSI server with the calls
 * the sidecars and kubelet make for a pod on this node (external-attacher: ControllerPublishVolume;
 * kubelet: NodeStageVolume, NodePublishVolume), each only when the server advertises it as kubelet
 * and the attacher check, and torn down in reverse. The server is the operator's (--csi-endpoint) or a
 * private twinvol-csi started on a temporary socket with this node's data root, state dir and kubelet
 * dir, and always stopped again.
 */

type Message = object;
type Unary = (req: Message, cb: (err: ServiceError | null, res: Record<string, unknown>) => void) => void;
const SERVICES = ['Identity', 'Controller', 'Node'] as const;
type Service = (typeof SERVICES)[number];

/** What the CSI side needs of the volume. */
export interface CsiSubject {
  volumeId: string;
  /** The PV's name: the pod's target directory is named after it. */
  pvName: string;
  fsType: string;
  /** multi-node volumes are asked for as MULTI_NODE_READER_ONLY, others SINGLE_NODE_READER_ONLY. */
  multiNode: boolean;
  /** A static PV's volumeAttributes (exec volumes: backend, driver and the driver's options). */
  context: Record<string, string>;
}

export interface PrivateServer {
  bin: string;
  config: Config;
  /** --flex-plugin-dir: where exec volumes' drivers are. */
  pluginDir: string;
}

const POD_UID = '7a1e0c5e-7e1f-4c1a-9c3b-0d0e0e1f0a02';
type CsiPackage = { csi: { v1: Record<Service, ServiceClientConstructor> } };
/** csi.proto, parsed once, from the text embedded in this bundle. */
let pkg: CsiPackage | undefined;

export class CsiSide {
  private readonly clients = new Map<Service, Client>();
  private published = false;
  private staged = false;
  private target = '';
  private staging = '';

  private constructor(
    private readonly socket: string,
    private readonly rec: Recorder,
    private readonly node: string,
    private readonly server?: { child: ChildProcess; dir: string; stderr: string[] },
  ) {}

  /** Connects to `endpoint`, or starts a private server; either way it must answer Probe ready. */
  static async open(rec: Recorder, node: string, endpoint: string | undefined, own: PrivateServer): Promise<CsiSide> {
    if (endpoint) {
      const socket = socketOf(endpoint);
      if (!existsSync(socket)) throw new Error(`no CSI server at ${endpoint}: ${socket} does not exist`);
      const side = new CsiSide(socket, rec, node);
      await side.ready(10_000, `the CSI server at ${endpoint}`);
      return side;
    }
    const dir = mkdtempSync(join(tmpdir(), 'twinvol-verify-'));
    const socket = join(dir, 'csi.sock');
    const c = own.config;
    const args = ['--endpoint', `unix://${socket}`, '--node-id', node, '--data-root', c.dataRoot, '--data-root-scope', c.dataRootScope, '--state-dir', c.stateDir, '--kubelet-dir', c.kubeletDir, '--flex-plugin-dir', own.pluginDir];
    const child = spawn(own.bin, args, { stdio: ['ignore', 'ignore', 'pipe'], env: process.env });
    const stderr: string[] = [];
    child.stderr?.on('data', (d: Buffer) => {
      // The server logs a line per RPC: only the last few are kept, for a start that fails.
      stderr.push(...d.toString().split('\n').filter(Boolean));
      stderr.splice(0, Math.max(0, stderr.length - 20));
    });
    child.on('error', (err) => stderr.push(err.message));
    const side = new CsiSide(socket, rec, node, { child, dir, stderr });
    const started = performance.now();
    try {
      await side.ready(20_000, `twinvol-csi (${own.bin})`);
    } catch (err) {
      await side.close();
      throw err;
    }
    rec.step({ model: 'csi', call: 'start twinvol-csi, Probe', outcome: 'ready', ms: performance.now() - started, detail: `private server on ${socket}` });
    return side;
  }

  private async ready(deadlineMs: number, what: string): Promise<void> {
    const until = Date.now() + deadlineMs;
    let last = '';
    for (;;) {
      const exited = this.server?.child.exitCode ?? this.server?.child.signalCode;
      if (exited !== undefined && exited !== null) throw new Error(`${what} exited at start (${exited}): ${this.server?.stderr.slice(-3).join(' | ')}`);
      if (existsSync(this.socket)) {
        try {
          const r = await this.call('Identity', 'Probe', {});
          if ((r.ready as { value?: boolean } | null | undefined)?.value !== false) return;
          last = 'Probe says not ready';
        } catch (err) {
          last = err instanceof Error ? err.message : String(err);
        }
      } else last = `no socket at ${this.socket}`;
      if (Date.now() > until) throw new Error(`${what} did not answer Probe: ${last}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** ControllerPublishVolume, NodeStageVolume, NodePublishVolume, read-only, in a scratch kubelet root. */
  async up(v: CsiSubject, root: string): Promise<Brought> {
    const ctl = await this.capabilities('Controller', 'ControllerGetCapabilities');
    const nodeCaps = await this.capabilities('Node', 'NodeGetCapabilities');
    const cap: VolumeCapability = { mount: { fs_type: v.fsType, mount_flags: [] }, access_mode: { mode: v.multiNode ? 'MULTI_NODE_READER_ONLY' : 'SINGLE_NODE_READER_ONLY' } };
    let publishContext: Record<string, string> = {};
    if (ctl.includes('PUBLISH_UNPUBLISH_VOLUME')) {
      this.published = true;
      const req: ControllerPublishVolumeRequest = { volume_id: v.volumeId, node_id: this.node, volume_capability: cap, readonly: true, volume_context: v.context };
      const r = await this.rpc('Controller', 'ControllerPublishVolume', req);
      publishContext = (r.publish_context as Record<string, string> | undefined) ?? {};
    }
    // kubelet's paths (pkg/volume/csi): plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount, pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount.
    const hash = createHash('sha256').update(v.volumeId).digest('hex');
    this.staging = join(root, 'plugins/kubernetes.io/csi/csi.twinvol.io', hash, 'globalmount');
    this.target = join(root, 'pods', POD_UID, 'volumes/kubernetes.io~csi', v.pvName, 'mount');
    const stages = nodeCaps.includes('STAGE_UNSTAGE_VOLUME');
    if (stages) {
      mkdirSync(this.staging, { recursive: true, mode: 0o750 });
      this.staged = true;
      const req: NodeStageVolumeRequest = { volume_id: v.volumeId, staging_target_path: this.staging, volume_capability: cap, publish_context: publishContext, volume_context: v.context };
      await this.rpc('Node', 'NodeStageVolume', req);
    }
    mkdirSync(dirname(this.target), { recursive: true, mode: 0o750 });
    // podInfoOnMount, as deploy/ sets it: the pod's identity in the context (the exec backend passes it on).
    const podInfo = { 'csi.storage.k8s.io/pod.name': 'twinvol-verify', 'csi.storage.k8s.io/pod.namespace': 'default', 'csi.storage.k8s.io/pod.uid': POD_UID, 'csi.storage.k8s.io/serviceAccount.name': 'default', 'csi.storage.k8s.io/ephemeral': 'false' };
    const req: NodePublishVolumeRequest = {
      volume_id: v.volumeId,
      ...(stages ? { staging_target_path: this.staging } : {}),
      target_path: this.target,
      volume_capability: cap,
      readonly: true,
      publish_context: publishContext,
      volume_context: { ...v.context, ...podInfo },
    };
    await this.rpc('Node', 'NodePublishVolume', req);
    return { path: this.target, device: stages ? deviceAt(this.staging) : '' };
  }

  /** NodeUnpublish, NodeUnstage, ControllerUnpublish for what up() began; each tried, the first failure thrown. */
  async down(volumeId: string): Promise<void> {
    const errors: string[] = [];
    const step = async (what: () => Promise<unknown>) => {
      try {
        await what();
      } catch (err) {
        errors.push(err instanceof Error ? err.message : String(err));
      }
    };
    if (this.target) await step(() => this.rpc('Node', 'NodeUnpublishVolume', { volume_id: volumeId, target_path: this.target }));
    if (this.staged) await step(async () => {
      await this.rpc('Node', 'NodeUnstageVolume', { volume_id: volumeId, staging_target_path: this.staging });
      this.staged = false;
    });
    if (this.published) await step(async () => {
      await this.rpc('Controller', 'ControllerUnpublishVolume', { volume_id: volumeId, node_id: this.node });
      this.published = false;
    });
    if (mounted(this.target) || mounted(this.staging)) errors.push('the CSI server left a mount behind');
    this.target = '';
    if (errors.length) throw new Error(errors.join('; '));
  }

  /** An exec volume the server registered for the static PV's first call: forgotten again (its data is the driver's, untouched). */
  async forget(volumeId: string): Promise<void> {
    await this.rpc('Controller', 'DeleteVolume', { volume_id: volumeId });
  }

  /** Closes the clients and stops a private server (SIGTERM, then SIGKILL), removing its socket dir. */
  async close(): Promise<void> {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    const s = this.server;
    if (!s) return;
    if (s.child.exitCode === null && s.child.signalCode === null) {
      const exited = new Promise((r) => s.child.once('exit', r));
      s.child.kill('SIGTERM');
      const late = setTimeout(() => s.child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(late);
      this.rec.note('twinvol-csi stopped');
    }
    rmSync(s.dir, { recursive: true, force: true });
  }

  private async capabilities(service: 'Controller' | 'Node', method: string): Promise<string[]> {
    const r = await this.call(service, method, {});
    const caps = (r.capabilities as { rpc?: { type?: string } }[] | undefined) ?? [];
    return caps.map((c) => c.rpc?.type ?? '');
  }

  /** One RPC, recorded with its status code; a failure throws with the server's message. */
  private async rpc(service: Service, method: string, req: Message): Promise<Record<string, unknown>> {
    const started = performance.now();
    try {
      const r = await this.call(service, method, req);
      this.rec.step({ model: 'csi', call: method, outcome: 'OK', ms: performance.now() - started });
      return r;
    } catch (err) {
      const e = err as Partial<ServiceError>;
      const code = typeof e.code === 'number' ? String(status[e.code]) : 'ERROR';
      const message = e.details ?? (err instanceof Error ? err.message : String(err));
      this.rec.step({ model: 'csi', call: method, outcome: code, ms: performance.now() - started, detail: message });
      throw new Error(`${method}: ${code}: ${message}`);
    }
  }

  private call(service: Service, method: string, req: Message): Promise<Record<string, unknown>> {
    const client = this.client(service) as unknown as Record<string, Unary>;
    const fn = client[method];
    if (typeof fn !== 'function') throw new Error(`csi.v1.${service} has no method ${method}`);
    return new Promise((done, fail) => fn.call(client, req, (err, res) => (err ? fail(err) : done(res))));
  }

  private client(service: Service): Client {
    let c = this.clients.get(service);
    if (!c) {
      pkg ??= loadPackageDefinition(packageDefinitionFromText(protoText)) as unknown as CsiPackage;
      c = new pkg.csi.v1[service](`unix://${this.socket}`, credentials.createInsecure());
      this.clients.set(service, c);
    }
    return c;
  }
}

/** unix:///path or /path (as twinvol-csi's --endpoint); anything else is a usage error. */
export function socketOf(endpoint: string): string {
  const path = endpoint.startsWith('unix://') ? endpoint.slice('unix://'.length) : endpoint;
  if (!path.startsWith('/')) throw new Error(`--csi-endpoint ${JSON.stringify(endpoint)} must be unix:///absolute/path`);
  return path;
}

/** The device mounted at a staging path (block volumes), by the kernel's mount table. */
function deviceAt(path: string): string {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return '';
  }
  const source = readMounts().find((m) => m.mountPoint === real)?.source ?? '';
  return source.startsWith('/dev/') ? source : '';
}
