import { accessMismatch, type DriverCapabilities, type AccessRequest, type AccessScope, invalidArgument, parseGid, requireMountFlagsOptions, validateMountOptions, type VolumeShape } from '../shared/index.js';
import type { AccessModeName, ControllerCapabilityName, NodeCapabilityName, VolumeCapability } from './csi-types.js';

/** A volume capability, checked and reduced to what the core understands. */
export interface Capability {
  access: 'mount' | 'block';
  mode: Exclude<AccessModeName, 'UNKNOWN'>;
  scope: AccessScope;
  /** The mode only allows reading (the *_READER_ONLY modes). */
  readerOnly: boolean;
  /** Mount access only; "" when the CO leaves the choice to the plugin. */
  fsType: string;
  mountFlags: string[];
  /** volume_mount_group as a gid. */
  mountGroup?: number;
}

const MODES: Record<Exclude<AccessModeName, 'UNKNOWN'>, { scope: AccessScope; readerOnly: boolean }> = {
  SINGLE_NODE_WRITER: { scope: 'single-node', readerOnly: false },
  SINGLE_NODE_READER_ONLY: { scope: 'single-node', readerOnly: true },
  SINGLE_NODE_SINGLE_WRITER: { scope: 'single-node', readerOnly: false },
  SINGLE_NODE_MULTI_WRITER: { scope: 'single-node', readerOnly: false },
  MULTI_NODE_READER_ONLY: { scope: 'multi-node', readerOnly: true },
  MULTI_NODE_SINGLE_WRITER: { scope: 'multi-node', readerOnly: false },
  MULTI_NODE_MULTI_WRITER: { scope: 'multi-node', readerOnly: false },
};

function isMode(value: unknown): value is Exclude<AccessModeName, 'UNKNOWN'> {
  return typeof value === 'string' && Object.hasOwn(MODES, value);
}

export function parseCapability(cap: VolumeCapability | null | undefined, what = 'volume_capability'): Capability {
  if (!cap) throw invalidArgument(`${what} is required`);
  const mode = cap.access_mode?.mode;
  if (!isMode(mode)) throw invalidArgument(`${what}.access_mode is required`);
  const access = cap.access_type ?? (cap.mount ? 'mount' : cap.block ? 'block' : undefined);
  if (access !== 'mount' && access !== 'block') throw invalidArgument(`${what} must set block or mount access`);
  const parsed: Capability = { access, mode, ...MODES[mode], fsType: '', mountFlags: [] };
  if (access === 'mount' && cap.mount) {
    parsed.fsType = cap.mount.fs_type;
    parsed.mountFlags = requireMountFlagsOptions(validateMountOptions(cap.mount.mount_flags, `${what}.mount.mount_flags`), `${what}.mount.mount_flags`);
    const gid = parseGid(cap.mount.volume_mount_group, `${what}.mount.volume_mount_group`);
    if (gid !== undefined) parsed.mountGroup = gid;
  }
  return parsed;
}

export function parseCapabilities(caps: readonly VolumeCapability[], what = 'volume_capabilities'): Capability[] {
  if (!caps.length) throw invalidArgument(`${what} is required`);
  return caps.map((c, i) => parseCapability(c, `${what}[${i}]`));
}

/** The capability in the core's words (shared/core/access.ts). */
export function accessRequestOf(cap: Capability): AccessRequest {
  return {
    scope: cap.scope,
    raw: cap.access === 'block',
    readerOnly: cap.readerOnly,
    singleWriter: cap.mode === 'SINGLE_NODE_SINGLE_WRITER',
    fsType: cap.access === 'mount' ? cap.fsType : '',
  };
}

/** Why `cap` does not fit the volume, or undefined when it does: the core's one rule. */
export function mismatch(volume: VolumeShape, cap: Capability): string | undefined {
  return accessMismatch(volume, accessRequestOf(cap));
}

/**
 * What a server fronting one FlexVolume driver (--backends exec) offers: what the driver's init
 * reports, as kubelet and the controller-manager read it. attach: ControllerPublish and NodeStage
 * (attach, waitforattach, mountdevice); requiresFSResize: the node's half of an expansion (expandfs);
 * fsGroup: the driver takes the pod's group. Registration (CreateVolume) is always there, and so is
 * the controller's expansion: the expand controller runs any FlexVolume driver's expandvolume
 * (flexvolume expander.go; the plugin is an ExpandableVolumePlugin whatever its init says), which
 * the StorageClass's allowVolumeExpansion gates. Snapshots never are: FlexVolume has none.
 */
export function execControllerCapabilities(driver: DriverCapabilities): ControllerCapabilityName[] {
  return ['CREATE_DELETE_VOLUME', ...(driver.attach ? (['PUBLISH_UNPUBLISH_VOLUME', 'PUBLISH_READONLY'] as const) : []), 'EXPAND_VOLUME'];
}

/** supportsMetrics: volume stats (kubelet's MetricsStatFS of the pod's directory; without it, MetricsNil). */
export function execNodeCapabilities(driver: DriverCapabilities): NodeCapabilityName[] {
  return [
    ...(driver.attach ? (['STAGE_UNSTAGE_VOLUME'] as const) : []),
    ...(driver.requiresFSResize ? (['EXPAND_VOLUME'] as const) : []),
    ...(driver.fsGroup ? (['VOLUME_MOUNT_GROUP'] as const) : []),
    ...(driver.supportsMetrics ? (['GET_VOLUME_STATS'] as const) : []),
  ];
}
