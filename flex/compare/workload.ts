import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type Core, csiGlobalMountPath, csiPodMountPath, type ExecVolume, flexArgv, flexGlobalMountPath, flexPodVolumePath, mountsOf, parseDriverName, validateVolumeId } from '../../shared/index.js';
import type { ScratchWorld } from '../scratch-world.js';
import type { Message, PrivateCsi } from './csi-server.js';
import { callFlex, loggedWork } from './kubelet-flex.js';
import { type Neutral, type VolumeState, volumeState } from './state.js';
import type { ToolCounter } from './tool-count.js';

export const BACKENDS = ['dir', 'block', 'static'] as const;
export type CompareBackend = (typeof BACKENDS)[number];
export const STEPS = ['attach', 'stage', 'publish', 'stats', 'expand', 'unpublish', 'unstage', 'detach'] as const;
export type StepName = (typeof STEPS)[number];
export type Model = 'flex' | 'csi';

/** One protocol call of one round. */
export interface CallSample {
  call: string;
  ms: number;
  /** The tools it ran, by the PATH shim (tool-count.ts). */
  tools: string[];
  /**
   * Mounts and loop devices made or undone as system calls (the mount addon), which the shim cannot see: FlexVolume's
   * by its own log line, the CSI server's by its debug log (csi-server.ts systemCallsOf).
   */
  systemCalls: string[];
  /** FlexVolume only: the tools the executable's own log line lists. */
  logged?: string[];
  /** A call allowed to fail (expansion: the host may refuse online growth) that did, with its message. */
  error?: string;
}

export interface RoundResult {
  steps: Partial<Record<StepName, CallSample[]>>;
  state: VolumeState;
}

/** The steps a model has no call for, and why (they appear in the report as unsupported). */
export const NOT_IN_PROTOCOL: Partial<Record<StepName, Partial<Record<Model, string>>>> = {
  stats: { flex: 'FlexVolume has no stats call: kubelet measures the pod directory itself (statfs, du)' },
};

export interface Workbench {
  scratch: ScratchWorld;
  /** The core on the scratch world: what each model recorded, read as it recorded it. */
  core: Core;
  node: string;
  flexBin: string;
  /** The environment of every FlexVolume call: the scratch world's settings, the tool shim first on PATH. */
  flexEnv: Record<string, string>;
  csi: PrivateCsi;
  tools: ToolCounter;
  signal?: AbortSignal;
}

/** The volume each model gets (one each per backend, reused every round: round 1's stage formats a block volume). */
export interface VolumeSpec {
  backend: CompareBackend;
  id: string;
  /** What `twinvol volume create` is given after the id. */
  createArgs: string[];
  sizeBytes: number;
  /** Grown by this much in each round's expand step (0: the backend cannot grow). */
  growBytes: number;
  /** kubelet's fsType (the PV's flexVolume.fsType, the CSI capability's fs_type). */
  fsType: string;
}

/** The FlexVolume driver name the executable plays under (kubelet's directory `acme~twinvol`). */
const FLEX_DRIVER = parseDriverName('acme/twinvol');
const MiB = 2 ** 20;
/** fsGroup 2000 for the pod, as kubelet hands it to each model (FlexVolume option, CSI volume_mount_group). */
const FS_GROUP = 2000;

/** Each backend's volume in the workload: a table, so choosing one is a lookup, not a branch on its name. */
const SPECS: Record<CompareBackend, Omit<VolumeSpec, 'backend' | 'id'>> = {
  block: { createArgs: ['--backend', 'block', '--size', '64Mi'], sizeBytes: 64 * MiB, growBytes: 16 * MiB, fsType: 'ext4' },
  dir: { createArgs: ['--backend', 'dir', '--size', '64Mi'], sizeBytes: 64 * MiB, growBytes: 16 * MiB, fsType: '' },
  // A static volume's size is not twinvol's to grow (docs/architecture.md, the rule table).
  static: { createArgs: ['--backend', 'static', '--source', 'tmpfs', '--fs-type', 'tmpfs', '--mount-options', 'size=16m'], sizeBytes: 16 * MiB, growBytes: 0, fsType: 'tmpfs' },
};

export function volumeSpec(backend: CompareBackend, model: Model): VolumeSpec {
  return { backend, id: `compare-${backend}-${model}`, ...SPECS[backend] };
}

const pod = (v: VolumeSpec, round: number) => ({ name: `compare-${round}`, namespace: 'default', uid: `0c0a7e00-0000-4000-8000-${String(round).padStart(12, '0')}`, serviceAccount: 'default' });
const neutral = (w: Workbench, v: VolumeSpec): Neutral => ({ volumeDir: join(w.scratch.dataRoot, 'volumes', v.id), scratchRoot: w.scratch.root });

/** The volume as the model left it published, its staging's record asked whether it is that record alone. */
async function publishedState(w: Workbench, v: VolumeSpec, staging: string, target: string): Promise<VolumeState> {
  const byRecord = (await mountsOf(w.core, validateVolumeId(v.id))).some((r) => r.path === staging && r.recordOnly === true);
  return volumeState(staging, target, neutral(w, v), byRecord);
}

/**
 * One round of the FlexVolume model: the calls kubelet and the controller-manager make for a pod on an
 * attachable driver (pkg/volume/flexvolume: getvolumename and attach from the attach-detach controller,
 * waitforattach, mountdevice and mount from kubelet, expandvolume from the expand controller and
 * expandfs from kubelet since twinvol's init leaves requiresFSResize at its default, true; then the
 * teardown), each argv built by flexArgv (shared/backends/exec-volumes.ts), as twinvol-csi's exec
 * backend and `twinvol flex check` build them.
 */
export async function flexRound(w: Workbench, v: VolumeSpec, round: number): Promise<RoundResult> {
  const pv = `pv-${v.id}`;
  const ev: ExecVolume = { id: pv, driver: FLEX_DRIVER, options: { volumeId: v.id }, fsType: v.fsType };
  const staging = flexGlobalMountPath(w.scratch.kubeletDir, FLEX_DRIVER, pv);
  const podDir = flexPodVolumePath(w.scratch.kubeletDir, pod(v, round).uid, FLEX_DRIVER, pv);
  const steps: RoundResult['steps'] = {};
  const call = async (step: StepName, verb: string, args: readonly string[]) => {
    w.signal?.throwIfAborted();
    const r = await callFlex(w.flexBin, w.flexEnv, verb, args);
    const logged = loggedWork(w.scratch.stateDir, verb);
    const sample: CallSample = { call: verb, ms: r.ms, tools: w.tools.take(), systemCalls: logged.systemCalls, logged: logged.spawns };
    (steps[step] ??= []).push(r.failure === undefined ? sample : { ...sample, error: r.failure });
    // Only an expansion may fail without ending the round, as kubelet carries on and retries it later.
    if (r.failure !== undefined && step !== 'expand') throw new Error(`FlexVolume ${r.failure}`);
    return r.status;
  };
  // GetVolumeName sends the spec's options alone: the same JSON as isattached's first argument.
  await call('attach', 'getvolumename', [flexArgv.isattached(ev, w.node)[0] ?? '']);
  const attached = await call('attach', 'attach', flexArgv.attach(ev, w.node, false));
  const device = (await call('stage', 'waitforattach', flexArgv.waitforattach(ev, attached?.device ?? '', false)))?.device ?? '';
  await call('stage', 'mountdevice', flexArgv.mountdevice(ev, staging, device, false));
  await call('publish', 'mount', flexArgv.mount(ev, podDir, { readonly: false, fsGroup: FS_GROUP, pod: pod(v, round) }));
  if (v.growBytes) {
    const [oldSize, newSize] = sizesOf(v, round);
    const grown = await call('expand', 'expandvolume', flexArgv.expandvolume(ev, newSize, oldSize));
    if (grown) await call('expand', 'expandfs', flexArgv.expandfs(ev, device, staging, newSize, oldSize));
  }
  const state = await publishedState(w, v, staging, podDir);
  await call('unpublish', 'unmount', flexArgv.unmount(podDir));
  await call('unstage', 'unmountdevice', flexArgv.unmountdevice(staging));
  await call('detach', 'detach', flexArgv.detach(ev, w.node));
  return { steps, state };
}

/**
 * One round of the CSI model: the external-attacher's ControllerPublish, kubelet's NodeStage (after
 * making the staging dir, csi_attacher.go), NodePublish (after making the target's parent, csi_mounter.go;
 * with pod info, as deploy/csidriver.yaml sets podInfoOnMount), its periodic NodeGetVolumeStats, the
 * external-resizer's ControllerExpand and kubelet's NodeExpand when the reply asks for it; then the
 * teardown.
 */
export async function csiRound(w: Workbench, v: VolumeSpec, round: number): Promise<RoundResult> {
  const p = pod(v, round);
  const staging = csiGlobalMountPath(w.scratch.kubeletDir, v.id);
  const target = csiPodMountPath(w.scratch.kubeletDir, p.uid, `pv-${v.id}`);
  const cap = { mount: { fs_type: v.fsType, mount_flags: [], volume_mount_group: String(FS_GROUP) }, access_mode: { mode: 'SINGLE_NODE_WRITER' } };
  const steps: RoundResult['steps'] = {};
  const call = async (step: StepName, service: 'Controller' | 'Node', method: string, req: Message): Promise<Message | undefined> => {
    w.signal?.throwIfAborted();
    const started = performance.now();
    const outcome = await w.csi.call(service, method, req).then(
      (reply) => ({ reply }),
      (err: unknown) => ({ error: err instanceof Error ? err.message : String(err) }),
    );
    const ms = performance.now() - started;
    // A call the server never answered (it died) has no rpc line to wait for: its own error is the one to report.
    const systemCalls = await w.csi.systemCallsOf(method).catch((err: unknown) => {
      if ('error' in outcome) return [];
      throw err;
    });
    const sample: CallSample = { call: method, ms, tools: w.tools.take(), systemCalls };
    (steps[step] ??= []).push('error' in outcome ? { ...sample, error: outcome.error } : sample);
    // Only an expansion may fail without ending the round: the resizer and kubelet retry it later.
    if ('error' in outcome && step !== 'expand') throw new Error(outcome.error);
    return 'reply' in outcome ? outcome.reply : undefined;
  };
  const published = await call('attach', 'Controller', 'ControllerPublishVolume', { volume_id: v.id, node_id: w.node, volume_capability: cap, readonly: false, volume_context: {} });
  const publishContext = published?.publish_context ?? {};
  mkdirSync(staging, { recursive: true });
  await call('stage', 'Node', 'NodeStageVolume', { volume_id: v.id, publish_context: publishContext, staging_target_path: staging, volume_capability: cap, volume_context: {} });
  mkdirSync(dirname(target), { recursive: true });
  const podInfo = { 'csi.storage.k8s.io/pod.name': p.name, 'csi.storage.k8s.io/pod.namespace': p.namespace, 'csi.storage.k8s.io/pod.uid': p.uid, 'csi.storage.k8s.io/serviceAccount.name': p.serviceAccount, 'csi.storage.k8s.io/ephemeral': 'false' };
  await call('publish', 'Node', 'NodePublishVolume', { volume_id: v.id, publish_context: publishContext, staging_target_path: staging, target_path: target, volume_capability: cap, readonly: false, volume_context: podInfo });
  await call('stats', 'Node', 'NodeGetVolumeStats', { volume_id: v.id, volume_path: target, staging_target_path: staging });
  if (v.growBytes) {
    const newSize = sizesOf(v, round)[1];
    const grown = await call('expand', 'Controller', 'ControllerExpandVolume', { volume_id: v.id, capacity_range: { required_bytes: String(newSize) }, volume_capability: cap });
    if (grown?.node_expansion_required)
      await call('expand', 'Node', 'NodeExpandVolume', { volume_id: v.id, volume_path: target, staging_target_path: staging, capacity_range: { required_bytes: String(newSize) }, volume_capability: cap });
  }
  const state = await publishedState(w, v, staging, target);
  await call('unpublish', 'Node', 'NodeUnpublishVolume', { volume_id: v.id, target_path: target });
  await call('unstage', 'Node', 'NodeUnstageVolume', { volume_id: v.id, staging_target_path: staging });
  await call('detach', 'Controller', 'ControllerUnpublishVolume', { volume_id: v.id, node_id: w.node });
  return { steps, state };
}

/** Round `round` (from 1) grows the volume from its size after round - 1 expansions by one more. */
function sizesOf(v: VolumeSpec, round: number): [number, number] {
  const old = v.sizeBytes + (round - 1) * v.growBytes;
  return [old, old + v.growBytes];
}
