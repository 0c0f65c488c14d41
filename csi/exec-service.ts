import type { handleUnaryCall, sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import {
  asksForExec,
  attachWithContext,
  checkedPathUnder,
  type Core,
  createVolume,
  describeVolume,
  type DriverCapabilities,
  type DriverName,
  EXEC_BACKEND,
  execRecordParameters,
  execVolumeOf,
  execVolumeOfRecord,
  publishingInline,
  failedPrecondition,
  idForNameOrUndefined,
  invalidArgument,
  isExecVolume,
  notFound,
  parseDriverName,
  type PodInfo,
  publish,
  stage,
  validateNodeName,
  validateVolumeId,
  type VolumeId,
  volumeIdForName,
} from '../shared/index.js';
import { type Capability, accessRequestOf, execControllerCapabilities, execNodeCapabilities, parseCapabilities, parseCapability } from './capabilities.js';
import { sizeFromRange } from './capacity.js';
import { isEphemeralRequest } from './ephemeral.js';
import { type ServiceContext, servesController } from './context.js';
import { toCsiVolume } from './convert.js';
import type {
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
  CreateVolumeRequest,
  CreateVolumeResponse,
  Empty,
  NodeHandlers,
  NodePublishVolumeRequest,
  NodeStageVolumeRequest,
  StringMap,
} from './csi-types.js';
import { CO_PREFIX, withoutCoKeys } from './parameters.js';

/**
 * The CSI server's side of the exec backend: translation only. Calls that carry a volume's
 * description (CreateVolume, ControllerPublishVolume, NodeStageVolume, NodePublishVolume) are read
 * here for exec volumes (a static PV's volume attributes registered, the fronted driver checked, pod
 * info and secrets passed on) and go to the same core verbs as every other volume, which take the
 * locks, apply the rules, write the records and call the driver through the exec backend's hooks
 * (shared/backends/exec.ts). The teardown calls, expansion and listings carry no description and take
 * the built-in path unchanged (csi/controller.ts, csi/node.ts).
 */
export interface ExecServing {
  /** The drivers' capabilities (their init runs now if it has not, or if the file changed). */
  capabilities(driver: DriverName): Promise<DriverCapabilities>;
  /** --flex-driver: the one driver this server fronts (volumes that name none are its). */
  driver?: DriverName;
  /** --backends exec: every volume is an exec volume, and the capabilities are the driver's. */
  only: boolean;
  /** --flex-inline: the drivers whose volumes may be CSI inline volumes. */
  inline: readonly string[];
}

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
   * The volume's id once the catalog holds it as the request describes it: a static PV's volume
   * attributes (driver, else this server's one, else the recorded one; options; fsType) registered, or
   * brought up to date while nothing holds the volume (shared/core/volumes.ts describeVolume), so that
   * the teardown calls, which carry no context, find its driver and options. A request with no
   * attributes at all takes the record as it is. `lifetime` "pod" marks a CSI inline volume's record,
   * deleted with its last mount. Returns the driver for the log line.
   */
  private async registered(rawId: string, context: StringMap, cap: Capability, lifetime?: 'pod'): Promise<{ id: VolumeId; driver: DriverName }> {
    const id = validateVolumeId(rawId, 'volume_id');
    const record = await this.core.catalog.getVolume(id);
    if (record && !isExecVolume(record)) throw invalidArgument(`volume ${id} is a ${record.backend} volume, not one of a FlexVolume driver`);
    const own = withoutCoKeys(context);
    if (record && Object.keys(own).length === 0) return { id, driver: this.checked(execVolumeOfRecord(record).driver) };
    const driver = own.driver ?? this.serving.driver?.full ?? (record && execVolumeOfRecord(record).driver.full);
    if (driver === undefined) throw notFound(`volume ${id} is not known, and names no FlexVolume driver`);
    own.driver = driver;
    const volume = execVolumeOf(id, own, own.fsType ?? cap.fsType);
    this.checked(volume.driver);
    await describeVolume(this.core, { id, backend: EXEC_BACKEND, capacityBytes: 0, fsType: volume.fsType, access: cap.scope, parameters: execRecordParameters(own), createdBy: 'csi', ...(lifetime ? { lifetime } : {}) }, record);
    return { id, driver: volume.driver };
  }

  /**
   * A CSI inline volume's attributes are written by the pod's author, where a PV's are written by an
   * administrator. An exec volume's name its FlexVolume driver and that driver's options, which stand
   * beside, and in kubelet's merge over, the pod identity and secrets the driver is told
   * (shared/backends/exec-volumes.ts); a pod allowed CSI inline volumes alone (Pod Security's
   * restricted profile) could otherwise run any driver on the node with options of its choosing, as
   * whichever pod it claims to be. So only a driver the operator names with --flex-inline, and never
   * with kubelet's own keys; twinvol's own inline volumes refuse a backend whose data they do not own
   * for the same reason (csi/ephemeral.ts).
   */
  private allowedInline(context: StringMap): void {
    const named = context.driver ?? this.serving.driver?.full;
    const driver = named === undefined ? undefined : parseDriverName(named, 'volume_context driver').full;
    if (driver === undefined || !this.serving.inline.includes(driver))
      throw invalidArgument(`an inline volume cannot be of FlexVolume driver ${driver ?? '(none named)'}: its options would be the pod author's (the node plugin's --flex-inline ${driver ?? '<vendor/name>'} allows it)`);
    const forged = Object.keys(context).find((k) => k.startsWith('kubernetes.io/'));
    if (forged) throw invalidArgument(`volume_context key ${JSON.stringify(forged)} in an inline volume: kubernetes.io/ keys are kubelet's, which twinvol fills in from the request`);
  }

  private checked(driver: DriverName): DriverName {
    const only = this.serving.driver;
    if (only && driver.full !== only.full) throw invalidArgument(`the volume names driver ${driver.full}; this server fronts ${only.full}`);
    return driver;
  }

  /** The one driver's capabilities. */
  private driverCapabilities() {
    const driver = this.serving.driver;
    if (!driver) throw invalidArgument('--backends exec needs --flex-driver');
    return this.serving.capabilities(driver);
  }

  /**
   * The Identity calls that are not the built-in ones (csi/identity.ts), if any: with --backends exec,
   * the plugin's capabilities are the driver's. Expansion is always ONLINE, as the expand controller
   * runs a FlexVolume driver's expandvolume whether or not the volume is in use
   * (csi/capabilities.ts execControllerCapabilities).
   */
  identity(): Pick<IdentityHandlers, 'GetPluginCapabilities'> | undefined {
    if (!this.serving.only) return undefined;
    return {
      GetPluginCapabilities: this.ctx.rpc.unary<GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse>('GetPluginCapabilities', async () => {
        // A driver that cannot be found or initialised fails the call, as it did when its init decided.
        await this.driverCapabilities();
        return {
          capabilities: [...(servesController(this.ctx.settings.mode) ? [{ service: { type: 'CONTROLLER_SERVICE' as const } }] : []), { volume_expansion: { type: 'ONLINE' as const } }],
        };
      }),
    };
  }

  controller(builtIn: ControllerHandlers): ControllerHandlers {
    const { rpc, settings } = this.ctx;
    const capabilities = this.serving.only
      ? {
          ControllerGetCapabilities: rpc.unary<ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse>('ControllerGetCapabilities', async () => ({
            capabilities: execControllerCapabilities(await this.driverCapabilities()).map((type) => ({ rpc: { type } })),
          })),
        }
      : {};
    return {
      ...builtIn,
      ...capabilities,
      CreateVolume: routed(
        builtIn.CreateVolume,
        rpc.unary<CreateVolumeRequest, CreateVolumeResponse>('CreateVolume', (r) => this.create(r), {
          // As the built-in CreateVolume logs it (csi/controller.ts): the id, and the name when it differs.
          describe: (r) => {
            const id = idForNameOrUndefined(r.name);
            return { ...(id ? { volumeId: id } : {}), ...(id !== r.name ? { name: r.name } : {}), backend: 'exec' };
          },
          exclusiveOn: (r) => `volume/${idForNameOrUndefined(r.name) ?? r.name}`,
        }),
        async (r) => this.serving.only || asksForExec(r.parameters),
      ),
      ControllerPublishVolume: routed(
        builtIn.ControllerPublishVolume,
        rpc.unary<ControllerPublishVolumeRequest, ControllerPublishVolumeResponse>('ControllerPublishVolume', async (r, note) => {
          const node = validateNodeName(r.node_id, 'node_id');
          const cap = requireFilesystem(parseCapability(r.volume_capability));
          const { id, driver } = await this.registered(r.volume_id, r.volume_context, cap);
          note({ driver: driver.full });
          const attached = await attachWithContext(this.core, id, node, {
            readonly: r.readonly || cap.readerOnly,
            via: 'csi',
            maxVolumesPerNode: settings.maxVolumesPerNode || undefined,
            access: accessRequestOf(cap),
            registeredNodesOnly: true,
          });
          return { publish_context: attached.publishContext };
        }, {
          describe: (r) => ({ volumeId: r.volume_id, nodeId: r.node_id, backend: 'exec' }),
          exclusiveOn: (r) => `volume/${r.volume_id}`,
        }),
        (r) => this.isExecVolume(r.volume_id, r.volume_context),
      ),
    };
  }

  /** Registration only: FlexVolume has no provisioning. The parameters are the PV's flexVolume fields. */
  private async create(r: CreateVolumeRequest): Promise<CreateVolumeResponse> {
    const id = volumeIdForName(r.name, 'name');
    const caps = parseCapabilities(r.volume_capabilities);
    // FlexVolume has no snapshots or clones: a content source cannot be honoured, and was once ignored.
    if (r.volume_content_source) throw invalidArgument('volume_content_source: exec volumes cannot be made from a snapshot or another volume');
    caps.forEach(requireFilesystem);
    const params = withoutCoKeys(r.parameters);
    if (params.driver === undefined && this.serving.driver) params.driver = this.serving.driver.full;
    // kubelet's kubernetes.io/fsType is the PV's fsType: the parameters', else the capabilities' one.
    const volume = execVolumeOf(id, params, params.fsType ?? caps.find((c) => c.fsType !== '')?.fsType ?? '');
    this.checked(volume.driver);
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

  node(builtIn: NodeHandlers): NodeHandlers {
    const { rpc } = this.ctx;
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
          const { id, driver } = await this.registered(r.volume_id, r.volume_context, cap);
          note({ driver: driver.full });
          await stage(this.core, id, path, { readonly: cap.readerOnly, access: accessRequestOf(cap), publishContext: r.publish_context });
          return {};
        }, at((r) => r.staging_target_path)),
        (r) => this.isExecVolume(r.volume_id, r.volume_context),
      ),
      NodePublishVolume: routed(
        builtIn.NodePublishVolume,
        rpc.unary<NodePublishVolumeRequest, Empty>('NodePublishVolume', async (r, note) => {
          const target = await checkedPathUnder(r.target_path, kubeletDir, 'target_path');
          const cap = requireFilesystem(parseCapability(r.volume_capability));
          const inline = isEphemeralRequest(r.volume_context);
          if (inline) this.allowedInline(r.volume_context);
          // An inline volume's record goes with its last mount (csi/node.ts NodeUnpublishVolume).
          const { id, driver } = await this.registered(r.volume_id, r.volume_context, cap, inline ? 'pod' : undefined);
          note({ driver: driver.full });
          const pod = podOf(r.volume_context);
          if (!pod.pod) note({ warning: NO_POD_INFO });
          // Registered above: whatever fails since (the driver's init, a bad staging path, the mount) ends
          // an inline volume again unless a mount was left, which kubelet then unpublishes.
          const publishing = async () => {
            // No staging path: a driver that does not attach mounts the target itself (no stage step); one
            // that attaches has STAGE_UNSTAGE_VOLUME, and a publish without its staging skipped a step.
            if (!r.staging_target_path && (await this.serving.capabilities(driver)).attach)
              throw failedPrecondition(`staging_target_path is required: the FlexVolume driver ${driver.full} attaches, so its volumes are staged before they are published`);
            const stagingPath = r.staging_target_path ? await checkedPathUnder(r.staging_target_path, kubeletDir, 'staging_target_path') : undefined;
            await publish(this.core, id, target, {
              readonly: r.readonly || cap.readerOnly,
              access: accessRequestOf(cap),
              via: 'csi',
              ...(stagingPath !== undefined ? { stagingPath } : {}),
              ...(cap.mountGroup !== undefined ? { fsGroup: cap.mountGroup } : {}),
              ...pod,
              secrets: r.secrets,
            });
          };
          await (inline ? publishingInline(this.core, id, publishing) : publishing());
          return {};
        }, at((r) => r.target_path)),
        (r) => this.isExecVolume(r.volume_id, r.volume_context),
      ),
    };
  }
}

/**
 * kubelet's mount always carries the pod (flexvolume mounter.go SetUpAt: kubernetes.io/pod.name,
 * pod.namespace, pod.uid, serviceAccount.name); a CSI CO sends it only when the CSIDriver object says
 * podInfoOnMount: true (deploy/csidriver.yaml does), so a deployment of its own without it would hand
 * a driver that keys its mounts by pod a mount without one, silently.
 */
const NO_POD_INFO = 'no pod info in volume_context: the FlexVolume driver\'s mount gets no kubernetes.io/pod.* keys, which kubelet always passed it; set podInfoOnMount: true in the CSIDriver object';

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
