import type { handleUnaryCall, sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import {
  asksForExec,
  checkedPathUnder,
  type Core,
  createVolume,
  type DriverName,
  EXEC_BACKEND,
  execRecordParameters,
  type ExecVolume,
  type ExecVolumes,
  execVolumeOf,
  execVolumeOfRecord,
  expandVolume,
  invalidArgument,
  isExecVolume,
  notFound,
  type PodInfo,
  validateNodeName,
  validateVolumeId,
  volumeIdForName,
} from '../shared/index.js';
import { accessRequestOf, execControllerCapabilities, execNodeCapabilities, parseCapabilities, parseCapability } from './capabilities.js';
import { sizeFromRange } from './capacity.js';
import { type ServiceContext, servesController } from './context.js';
import { toCsiVolume } from './convert.js';
import type {
  ControllerExpandVolumeRequest,
  ControllerExpandVolumeResponse,
  ControllerGetCapabilitiesRequest,
  ControllerGetCapabilitiesResponse,
  GetPluginCapabilitiesRequest,
  GetPluginCapabilitiesResponse,
  IdentityHandlers,
  NodeGetCapabilitiesRequest,
  NodeGetCapabilitiesResponse,
  ControllerHandlers,
  ControllerPublishVolumeRequest,
  ControllerPublishVolumeResponse,
  ControllerUnpublishVolumeRequest,
  CreateVolumeRequest,
  CreateVolumeResponse,
  Empty,
  NodeExpandVolumeRequest,
  NodeExpandVolumeResponse,
  NodeHandlers,
  NodePublishVolumeRequest,
  NodeStageVolumeRequest,
  NodeUnpublishVolumeRequest,
  NodeUnstageVolumeRequest,
  StringMap,
} from './csi-types.js';
import { CO_PREFIX, withoutCoKeys } from './parameters.js';

/**
 * The CSI server's side of the exec backend: which calls are about exec volumes, and each such call
 * made into the FlexVolume calls kubelet would make (shared/backends/exec-volumes.ts). Every other
 * volume takes the built-in path unchanged (csi/controller.ts, csi/node.ts).
 */
export interface ExecServing {
  volumes: ExecVolumes;
  /** --flex-driver: the one driver this server fronts (volumes that name none are its). */
  driver?: DriverName;
  /** --backends exec: every volume is an exec volume, and the capabilities are the driver's. */
  only: boolean;
}

/** The publish_context key the attach's device travels under to NodeStageVolume. */
export const DEVICE_KEY = 'device';
const POD_KEYS = { name: `${CO_PREFIX}pod.name`, namespace: `${CO_PREFIX}pod.namespace`, uid: `${CO_PREFIX}pod.uid`, serviceAccount: `${CO_PREFIX}serviceAccount.name` };

type Route<Req> = (req: Req) => Promise<boolean>;

/** A handler that sends exec volumes one way and every other volume the built-in way. */
function routed<Req, Res>(builtIn: handleUnaryCall<Req, Res>, exec: handleUnaryCall<Req, Res>, isExec: Route<Req>): handleUnaryCall<Req, Res> {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
    // A lookup that fails (a malformed id) takes the built-in path, which answers it properly.
    isExec(call.request).then(
      (yes) => (yes ? exec : builtIn)(call, callback),
      () => builtIn(call, callback),
    );
  };
}

export class ExecService {
  constructor(
    private readonly ctx: ServiceContext,
    private readonly serving: ExecServing,
  ) {}

  private get core(): Core {
    return this.ctx.core;
  }

  /** The catalog says so, the request's context says so, or this server serves nothing else. */
  private async isExecVolume(id: string, context?: StringMap): Promise<boolean> {
    if (this.serving.only) return true;
    if (context && asksForExec(context)) return true;
    const record = await this.core.catalog.getVolume(validateVolumeId(id, 'volume_id'));
    return record !== undefined && isExecVolume(record);
  }

  /**
   * The volume from the catalog; else from a static PV's volume attributes, registered so that the
   * teardown calls (which carry no context) find its driver; else this server's one driver.
   */
  private async volumeOf(rawId: string, context?: StringMap, fsType = ''): Promise<ExecVolume> {
    const id = validateVolumeId(rawId, 'volume_id');
    const record = await this.core.catalog.getVolume(id);
    if (record) {
      if (!isExecVolume(record)) throw invalidArgument(`volume ${id} is a ${record.backend} volume, not one of a FlexVolume driver`);
      return this.checked(execVolumeOfRecord(record), fsType);
    }
    const own = context ? withoutCoKeys(context) : {};
    if (own.driver === undefined && this.serving.driver) own.driver = this.serving.driver.full;
    if (own.driver === undefined) throw notFound(`volume ${id} is not known, and names no FlexVolume driver`);
    const volume = this.checked(execVolumeOf(id, own, own.fsType ?? fsType), fsType);
    if (context) {
      await createVolume(this.core, { id, backend: EXEC_BACKEND, capacityBytes: 0, fsType: volume.fsType, parameters: execRecordParameters(own), createdBy: 'csi' });
    }
    return volume;
  }

  private checked(volume: ExecVolume, fsType: string): ExecVolume {
    const only = this.serving.driver;
    if (only && volume.driver.full !== only.full) throw invalidArgument(`volume ${volume.id} names driver ${volume.driver.full}; this server fronts ${only.full}`);
    return volume.fsType === '' && fsType !== '' ? { ...volume, fsType } : volume;
  }

  /** The one driver's capabilities (its init runs now if it has not, or if the file changed). */
  private driverCapabilities() {
    const driver = this.serving.driver;
    if (!driver) throw invalidArgument('--backends exec needs --flex-driver');
    return this.serving.volumes.drivers.capabilities(driver);
  }

  /** --backends exec: the plugin's capabilities are the driver's (expansion only if it resizes). */
  identity(builtIn: IdentityHandlers): IdentityHandlers {
    if (!this.serving.only) return builtIn;
    return {
      ...builtIn,
      GetPluginCapabilities: this.ctx.rpc.unary<GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse>('GetPluginCapabilities', async () => ({
        capabilities: [
          ...(servesController(this.ctx.settings.mode) ? [{ service: { type: 'CONTROLLER_SERVICE' as const } }] : []),
          ...((await this.driverCapabilities()).requiresFSResize ? [{ volume_expansion: { type: 'ONLINE' as const } }] : []),
        ],
      })),
    };
  }

  controller(builtIn: ControllerHandlers): ControllerHandlers {
    const { rpc } = this.ctx;
    const { volumes } = this.serving;
    const capabilities = this.serving.only
      ? {
          ControllerGetCapabilities: rpc.unary<ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse>('ControllerGetCapabilities', async () => ({
            capabilities: execControllerCapabilities(await this.driverCapabilities()).map((type) => ({ rpc: { type } })),
          })),
        }
      : {};
    const onVolume = <R extends { volume_id: string; node_id: string }>() => ({
      describe: (r: R) => ({ volumeId: r.volume_id, nodeId: r.node_id, backend: 'exec' }),
      exclusiveOn: (r: R) => `volume/${r.volume_id}`,
    });
    return {
      ...builtIn,
      ...capabilities,
      CreateVolume: routed(
        builtIn.CreateVolume,
        rpc.unary<CreateVolumeRequest, CreateVolumeResponse>('CreateVolume', (r) => this.create(r), {
          describe: (r) => ({ name: r.name, backend: 'exec' }),
          exclusiveOn: (r) => `volume/${r.name}`,
        }),
        async (r) => this.serving.only || asksForExec(r.parameters),
      ),
      ControllerPublishVolume: routed(
        builtIn.ControllerPublishVolume,
        rpc.unary<ControllerPublishVolumeRequest, ControllerPublishVolumeResponse>('ControllerPublishVolume', async (r, note) => {
          const node = validateNodeName(r.node_id, 'node_id');
          const cap = parseCapability(r.volume_capability);
          const volume = await this.volumeOf(r.volume_id, r.volume_context, cap.fsType);
          note({ driver: volume.driver.full });
          const device = await volumes.attach(volume, node, r.readonly || cap.readerOnly);
          const publishContext: StringMap = device ? { [DEVICE_KEY]: device } : {};
          return { publish_context: publishContext };
        }, onVolume()),
        (r) => this.isExecVolume(r.volume_id, r.volume_context),
      ),
      ControllerUnpublishVolume: routed(
        builtIn.ControllerUnpublishVolume,
        rpc.unary<ControllerUnpublishVolumeRequest, Empty>('ControllerUnpublishVolume', async (r, note) => {
          const volume = await this.volumeOf(r.volume_id);
          note({ driver: volume.driver.full });
          // An unpublish from every node (no node_id) has no FlexVolume counterpart: detach names one node.
          if (!r.node_id) throw invalidArgument('node_id is required: a FlexVolume detach names the node');
          await volumes.detach(volume, validateNodeName(r.node_id, 'node_id'));
          return {};
        }, onVolume()),
        (r) => this.isExecVolume(r.volume_id),
      ),
      ControllerExpandVolume: routed(
        builtIn.ControllerExpandVolume,
        rpc.unary<ControllerExpandVolumeRequest, ControllerExpandVolumeResponse>('ControllerExpandVolume', (r) => this.expand(r), {
          describe: (r) => ({ volumeId: r.volume_id, backend: 'exec' }),
          exclusiveOn: (r) => `volume/${r.volume_id}`,
        }),
        (r) => this.isExecVolume(r.volume_id),
      ),
    };
  }

  /** Registration only: FlexVolume has no provisioning. The parameters are the PV's flexVolume fields. */
  private async create(r: CreateVolumeRequest): Promise<CreateVolumeResponse> {
    const id = volumeIdForName(r.name, 'name');
    const caps = parseCapabilities(r.volume_capabilities);
    caps.forEach(requireFilesystem);
    const params = withoutCoKeys(r.parameters);
    if (params.driver === undefined && this.serving.driver) params.driver = this.serving.driver.full;
    const volume = this.checked(execVolumeOf(id, params), '');
    const { volume: record } = await createVolume(this.core, {
      id,
      name: r.name,
      backend: EXEC_BACKEND,
      capacityBytes: sizeFromRange(r.capacity_range, 0, 1),
      fsType: volume.fsType,
      access: caps.some((c) => c.scope === 'multi-node') ? 'multi-node' : 'single-node',
      parameters: execRecordParameters(params),
      createdBy: 'csi',
      accessRequests: caps.map(accessRequestOf),
    });
    return { volume: toCsiVolume(record) };
  }

  private async expand(r: ControllerExpandVolumeRequest): Promise<ControllerExpandVolumeResponse> {
    const volume = await this.volumeOf(r.volume_id);
    const caps = await this.serving.volumes.capabilities(volume);
    if (!caps.requiresFSResize) throw invalidArgument(`FlexVolume driver ${volume.driver.full} does not expand volumes (its init says requiresFSResize: false)`);
    const record = await this.core.catalog.requireVolume(validateVolumeId(r.volume_id, 'volume_id'));
    const wanted = sizeFromRange(r.capacity_range, record.capacityBytes, 1);
    if (wanted > record.capacityBytes) await this.serving.volumes.expandVolume(volume, wanted, record.capacityBytes);
    const done = await expandVolume(this.core, record.id, wanted);
    return { capacity_bytes: String(done.capacityBytes), node_expansion_required: true };
  }

  node(builtIn: NodeHandlers): NodeHandlers {
    const { rpc } = this.ctx;
    const { volumes } = this.serving;
    const capabilities = this.serving.only
      ? {
          NodeGetCapabilities: rpc.unary<NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse>('NodeGetCapabilities', async () => ({
            capabilities: execNodeCapabilities(await this.driverCapabilities()).map((type) => ({ rpc: { type } })),
          })),
        }
      : {};
    const kubeletDir = this.core.config.kubeletDir;
    const at = <R extends { volume_id: string }>(path: (r: R) => string) => ({
      describe: (r: R) => ({ volumeId: r.volume_id, path: path(r), backend: 'exec' }),
      exclusiveOn: (r: R) => `volume/${r.volume_id}`,
    });
    return {
      ...builtIn,
      ...capabilities,
      NodeStageVolume: routed(
        builtIn.NodeStageVolume,
        rpc.unary<NodeStageVolumeRequest, Empty>('NodeStageVolume', async (r, note) => {
          const path = await checkedPathUnder(r.staging_target_path, kubeletDir, 'staging_target_path');
          const cap = requireFilesystem(parseCapability(r.volume_capability));
          const volume = await this.volumeOf(r.volume_id, r.volume_context, cap.fsType);
          note({ driver: volume.driver.full, ...(await volumes.stage(volume, path, r.publish_context[DEVICE_KEY] ?? '', cap.readerOnly)) });
          return {};
        }, at((r) => r.staging_target_path)),
        (r) => this.isExecVolume(r.volume_id, r.volume_context),
      ),
      NodeUnstageVolume: routed(
        builtIn.NodeUnstageVolume,
        rpc.unary<NodeUnstageVolumeRequest, Empty>('NodeUnstageVolume', async (r, note) => {
          const path = await checkedPathUnder(r.staging_target_path, kubeletDir, 'staging_target_path');
          const volume = await this.volumeOf(r.volume_id);
          note({ driver: volume.driver.full, ...(await volumes.unstage(volume, path)) });
          return {};
        }, at((r) => r.staging_target_path)),
        (r) => this.isExecVolume(r.volume_id),
      ),
      NodePublishVolume: routed(
        builtIn.NodePublishVolume,
        rpc.unary<NodePublishVolumeRequest, Empty>('NodePublishVolume', async (r, note) => {
          const target = await checkedPathUnder(r.target_path, kubeletDir, 'target_path');
          const cap = requireFilesystem(parseCapability(r.volume_capability));
          const volume = await this.volumeOf(r.volume_id, r.volume_context, cap.fsType);
          const stagingPath = r.staging_target_path ? await checkedPathUnder(r.staging_target_path, kubeletDir, 'staging_target_path') : undefined;
          const done = await volumes.publish(volume, target, {
            readonly: r.readonly || cap.readerOnly,
            ...(stagingPath !== undefined ? { stagingPath } : {}),
            ...(cap.mountGroup !== undefined ? { fsGroup: cap.mountGroup } : {}),
            ...podOf(r.volume_context),
            secrets: r.secrets,
          });
          note({ driver: volume.driver.full, ...done });
          return {};
        }, at((r) => r.target_path)),
        (r) => this.isExecVolume(r.volume_id, r.volume_context),
      ),
      NodeUnpublishVolume: routed(
        builtIn.NodeUnpublishVolume,
        rpc.unary<NodeUnpublishVolumeRequest, Empty>('NodeUnpublishVolume', async (r, note) => {
          const target = await checkedPathUnder(r.target_path, kubeletDir, 'target_path');
          const volume = await this.volumeOf(r.volume_id);
          note({ driver: volume.driver.full, ...(await volumes.unpublish(volume, target)) });
          return {};
        }, at((r) => r.target_path)),
        (r) => this.isExecVolume(r.volume_id),
      ),
      NodeExpandVolume: routed(
        builtIn.NodeExpandVolume,
        rpc.unary<NodeExpandVolumeRequest, NodeExpandVolumeResponse>('NodeExpandVolume', async (r) => {
          const volume = await this.volumeOf(r.volume_id);
          const record = await this.core.catalog.requireVolume(validateVolumeId(r.volume_id, 'volume_id'));
          const path = await checkedPathUnder(r.staging_target_path || r.volume_path, kubeletDir, 'staging_target_path');
          const size = sizeFromRange(r.capacity_range, record.capacityBytes, 1);
          await volumes.expandFs(volume, path, size, record.capacityBytes);
          return { capacity_bytes: String(size) };
        }, at((r) => r.volume_path)),
        (r) => this.isExecVolume(r.volume_id),
      ),
    };
  }
}

/** CSI pod info (podInfoOnMount) as kubelet's pod keys; absent when the CO sends none. */
function podOf(context: StringMap): { pod?: PodInfo } {
  if (context[POD_KEYS.name] === undefined) return {};
  return {
    pod: {
      name: context[POD_KEYS.name] ?? '',
      namespace: context[POD_KEYS.namespace] ?? '',
      uid: context[POD_KEYS.uid] ?? '',
      serviceAccount: context[POD_KEYS.serviceAccount] ?? '',
    },
  };
}

/** FlexVolume mounts filesystems only: a raw block request for an exec volume is refused by name. */
function requireFilesystem<C extends { access: string }>(cap: C): C {
  if (cap.access === 'block') throw invalidArgument('exec volumes are filesystems: FlexVolume has no raw block access');
  return cap;
}
