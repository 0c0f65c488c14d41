import { asksForExec, KUBELET_SECRET_PREFIX, type Claims, type Core, createVolume, invalidArgument, notFound, parseBoolean, parseGid, parseWrittenSize, quoted, refuseContradiction, validatePvName, validateStringMap, validateVolumeId, type VolumeId, type VolumeRecord } from '../shared/index.js';

/** Keys kubelet adds to every options map (kubelet's pkg/volume/flexvolume adds them); everything else comes from the PV. */
const KUBE = 'kubernetes.io/';
const K_FS_TYPE = `${KUBE}fsType`;
const K_READWRITE = `${KUBE}readwrite`;
const K_PV_NAME = `${KUBE}pvOrVolumeName`;
const K_FS_GROUP = `${KUBE}mounterArgs.FsGroup`;
const K_FS_GROUP_OLD = `${KUBE}fsGroup`;

/** The PV options twinvol reads. Unknown ones are refused, so a typo ("volumeID") is a clear error, not a silent default. */
export const DRIVER_KEYS = ['volumeId', 'createIfMissing', 'size', 'backend', 'fsType', 'readOnly', 'access', 'source', 'mountOptions'] as const;

export interface FlexOptions {
  raw: Record<string, string>;
  /** The volume id from the options, or the PV name to resolve it through. */
  volumeId?: VolumeId;
  pvName?: string;
  readonly: boolean;
  fsGroup?: number;
  secretKeys: string[];
  /**
   * What a missing volume would be made as: parsed with the rest, so a bad value is refused whether
   * or not the volume exists, and the same options get the same answer either way.
   */
  create: { wanted: boolean; backend: string; capacityBytes: number; access: VolumeRecord['access'] };
}

/** Parses the options argv element: one JSON object of strings, as kubelet's Go encoder writes it. */
export function parseOptions(json: string | undefined): FlexOptions {
  if (json === undefined) throw invalidArgument('the options JSON argument is missing');
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw invalidArgument('the options argument is not valid JSON');
  }
  const raw = validateStringMap(parsed, 'options');
  for (const key of Object.keys(raw)) {
    if (key.startsWith(KUBE)) continue;
    if (!(DRIVER_KEYS as readonly string[]).includes(key))
      throw invalidArgument(`unknown option ${quoted(key, 64)} (twinvol reads: ${DRIVER_KEYS.join(', ')})`);
  }
  const secretKeys: string[] = [];
  for (const [key, value] of Object.entries(raw)) {
    if (!key.startsWith(KUBELET_SECRET_PREFIX)) continue;
    // Validated so a mangled secret fails here, loudly, rather than deep in a mount; never echoed.
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value) || value.length % 4 !== 0) throw invalidArgument(`secret ${quoted(key.slice(KUBELET_SECRET_PREFIX.length), 64)} is not base64`);
    secretKeys.push(key.slice(KUBELET_SECRET_PREFIX.length));
  }
  const readwrite = raw[K_READWRITE];
  if (readwrite !== undefined && readwrite !== 'ro' && readwrite !== 'rw') throw invalidArgument(`${K_READWRITE} must be "ro" or "rw"`);
  const options: FlexOptions = {
    raw,
    readonly: readwrite === 'ro' || parseBoolean(raw.readOnly, 'readOnly', false),
    secretKeys,
    create: {
      wanted: parseBoolean(raw.createIfMissing, 'createIfMissing', false),
      backend: flexBackend(raw.backend),
      capacityBytes: raw.size === undefined ? 0 : parseWrittenSize(raw.size),
      access: parseAccess(raw.access),
    },
  };
  if (raw.volumeId !== undefined) options.volumeId = validateVolumeId(raw.volumeId, 'option volumeId');
  if (raw[K_PV_NAME]) options.pvName = validatePvName(raw[K_PV_NAME], K_PV_NAME);
  const gid = parseGid(raw[K_FS_GROUP] ?? raw[K_FS_GROUP_OLD], 'fsGroup');
  if (gid !== undefined) options.fsGroup = gid;
  return options;
}

/** The id the options name: `volumeId`, else the volume attach recorded for the PV, else the PV name itself. */
export async function volumeIdOf(core: Core, opts: FlexOptions): Promise<VolumeId | undefined> {
  if (opts.volumeId) return opts.volumeId;
  if (!opts.pvName) return undefined;
  return volumeIdOfPv(core, opts.pvName);
}

/** What detach and reconstructed calls have to go on: the PV name. */
export async function volumeIdOfPv(core: Core, pvName: string): Promise<VolumeId> {
  // A PV name that is not a valid volume id names no volume: the error says which PV.
  return (await core.catalog.pvVolume(pvName)) ?? validateVolumeId(pvName, `PV name ${pvName.slice(0, 64)} as volume id`);
}

/**
 * What the PV's options say of the volume, for the core to hold against the catalog under the volume's
 * lock (shared/core/contradiction.ts). kubelet fills kubernetes.io/fsType from the PV spec: that is the
 * platform's, not the PV writer's, so it counts only where the volume has a filesystem type.
 */
export function claimsOf(opts: FlexOptions): Claims {
  const kubeFsType = opts.raw[K_FS_TYPE];
  return { values: opts.raw, what: 'option', ...(kubeFsType ? { implied: { fsType: kubeFsType } } : {}) };
}

/**
 * The volume these options name. The id comes from the `volumeId` option, or, for calls made from
 * volumes kubelet reconstructed after a restart (which carry only the PV name), from the PV record
 * that attach left, or from a volume whose id is the PV name. The options may repeat the catalog,
 * never contradict it (the core's rule); verbs that change the volume check them again under its
 * lock, on the record they act on.
 */
export async function resolveVolume(core: Core, opts: FlexOptions): Promise<VolumeRecord> {
  const id = await volumeIdOf(core, opts);
  if (!id) throw invalidArgument('options name no volume: set volumeId in the PV\'s flexVolume.options');
  const existing = await core.catalog.getVolume(id);
  // Checked on the record this read: a verb that only reads the volume (getvolumename, expand) is
  // refused like one that changes it, and a refused attach records nothing, not even the PV.
  if (existing) refuseContradiction(existing, claimsOf(opts));
  if (existing) return existing;
  if (!opts.create.wanted) throw notFound(`volume ${id} does not exist: create it with "twinvol volume create", or set createIfMissing and size`);
  const { volume } = await createVolume(core, {
    id,
    backend: opts.create.backend,
    capacityBytes: opts.create.capacityBytes,
    fsType: opts.raw.fsType || opts.raw[K_FS_TYPE] || undefined,
    access: opts.create.access,
    source: opts.raw.source,
    mountOptions: opts.raw.mountOptions,
    createdBy: 'flex',
  });
  return volume;
}

/**
 * The backend a PV's options may create: an exec volume is a third-party driver's, served through
 * twinvol-csi's exec backend (docs/exec-backend.md); made here it could only fail every verb.
 */
function flexBackend(value: string | undefined): string {
  if (value !== undefined && asksForExec({ backend: value })) throw invalidArgument('option backend "exec": a FlexVolume driver\'s volume is served by twinvol-csi\'s exec backend, not by this executable (use block, dir or static)');
  return value ?? 'block';
}

function parseAccess(value: string | undefined): VolumeRecord['access'] {
  if (value === undefined || value === 'single-node' || value === 'multi-node') return value ?? 'single-node';
  throw invalidArgument('access must be "single-node" or "multi-node"');
}
