import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { ControllerPublishVolumeRequest } from '../../csi/generated/csi/v1/ControllerPublishVolumeRequest.js';
import type { NodePublishVolumeRequest } from '../../csi/generated/csi/v1/NodePublishVolumeRequest.js';
import type { NodeStageVolumeRequest } from '../../csi/generated/csi/v1/NodeStageVolumeRequest.js';
import type { VolumeCapability } from '../../csi/generated/csi/v1/VolumeCapability.js';
import { type Config, csiGlobalMountPath, csiPodMountPath, mountAt } from '../../shared/index.js';
import { CsiCallError, type Message, PrivateCsi } from '../compare/csi-server.js';
import { type Brought, mounted } from './verify-flex.js';
import { attempt, type Recorder } from './verify-report.js';

/**
 * The CSI half of `twinvol migrate verify`: the volume brought up through a CSI server with the calls
 * the sidecars and kubelet make for a pod on this node (external-attacher: ControllerPublishVolume;
 * kubelet: NodeStageVolume, NodePublishVolume), each only when the server advertises it as kubelet
 * and the attacher check, and torn down in reverse. The server is the operator's (--csi-endpoint) or a
 * private twinvol-csi started on a temporary socket with this node's data root, state dir and kubelet
 * dir, and always stopped again.
 */

type Service = 'Identity' | 'Controller' | 'Node';

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

export class CsiSide {
  private published = false;
  private staged = false;
  private target = '';
  private staging = '';

  private constructor(
    private readonly csi: PrivateCsi,
    private readonly rec: Recorder,
    private readonly node: string,
    /** A private server's socket directory, removed at close. */
    private readonly dir?: string,
  ) {}

  /**
   * Connects to `endpoint`, or starts a private server; either way it must answer Probe ready. The
   * server and its client are compare's (flex/compare/csi-server.ts): one way to run and call a CSI server.
   */
  static async open(rec: Recorder, node: string, endpoint: string | undefined, own: PrivateServer): Promise<CsiSide> {
    if (endpoint) {
      const socket = socketOf(endpoint);
      if (!existsSync(socket)) throw new Error(`no CSI server at ${endpoint}: ${socket} does not exist`);
      return new CsiSide(await PrivateCsi.connect(socket, 10_000, callMs(own.config)), rec, node);
    }
    const dir = mkdtempSync(join(tmpdir(), 'twinvol-verify-'));
    const socketPath = join(dir, 'csi.sock');
    const c = own.config;
    const args = ['--data-root', c.dataRoot, '--data-root-scope', c.dataRootScope, '--state-dir', c.stateDir, '--kubelet-dir', c.kubeletDir, '--flex-plugin-dir', own.pluginDir];
    const started = performance.now();
    let csi: PrivateCsi;
    try {
      csi = await PrivateCsi.start({ bin: own.bin, socketPath, nodeId: node, args, env: stringEnv(), startMs: 20_000, callMs: callMs(own.config) });
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`twinvol-csi (${own.bin}): ${err instanceof Error ? err.message : String(err)}`);
    }
    rec.step({ model: 'csi', call: 'start twinvol-csi, Probe', outcome: 'ready', ms: performance.now() - started, detail: `private server on ${socketPath}` });
    return new CsiSide(csi, rec, node, dir);
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
    // kubelet's paths (shared/kubelet-paths.ts), under verify's scratch kubelet root.
    this.staging = csiGlobalMountPath(root, v.volumeId);
    this.target = csiPodMountPath(root, POD_UID, v.pvName);
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
    const step = (what: () => Promise<unknown>) => attempt(errors, what);
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

  /**
   * A signal: the call waiting for the server ends now, not at its deadline, so the teardown follows
   * at once. A second signal gives up on the server: later calls fail at once and the sweep
   * (verify.ts) cleans up around it.
   */
  interrupt(signal: string, again: boolean): void {
    this.csi.cancel(`interrupted by ${signal}`, again);
  }

  /** Closes the clients and stops a private server (SIGTERM, then SIGKILL), removing its socket dir. */
  async close(): Promise<void> {
    const owned = this.csi.ownsServer;
    await this.csi.stop();
    if (owned) this.rec.note('twinvol-csi stopped');
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  private async capabilities(service: 'Controller' | 'Node', method: string): Promise<string[]> {
    let r: Message;
    try {
      r = await this.csi.call(service, method, {});
    } catch (err) {
      // Not a recorded step, so no step() to say why: a call a signal cancelled says the signal.
      if (this.rec.interrupted) throw new Error(`interrupted by ${this.rec.interrupted}`);
      throw err;
    }
    const caps = (r.capabilities as { rpc?: { type?: string } }[] | undefined) ?? [];
    return caps.map((c) => c.rpc?.type ?? '');
  }

  /** One RPC, recorded once with its status code; a failure throws with the server's message. */
  private async rpc(service: Service, method: string, req: object): Promise<Message> {
    const started = performance.now();
    let r: Message;
    try {
      r = await this.csi.call(service, method, { ...req });
    } catch (err) {
      const code = err instanceof CsiCallError ? err.code : 'ERROR';
      const message = err instanceof CsiCallError ? err.details : err instanceof Error ? err.message : String(err);
      this.rec.step({ model: 'csi', call: method, outcome: code, ms: performance.now() - started, detail: message });
      throw new Error(`${method}: ${code}: ${message}`);
    }
    // Outside the try: step() throws once interrupted, and that is the run stopping, not this call failing.
    this.rec.step({ model: 'csi', call: method, outcome: 'OK', ms: performance.now() - started });
    return r;
  }
}

/**
 * Each RPC's deadline: the config's deadline for one external command (two minutes by default, as
 * kubelet's for a CSI call), since the FlexVolume half gives each driver call the same.
 */
function callMs(config: Config): number {
  return config.commandTimeoutMs;
}

/** This process's environment without unset entries: the private server runs with what verify runs with. */
function stringEnv(): Record<string, string> {
  return Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
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
  const source = mountAt(real)?.source ?? '';
  return source.startsWith('/dev/') ? source : '';
}
