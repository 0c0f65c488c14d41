import { backendTraits, type ContentSource, type Core, createVolume, fsTypeOfUses, invalidArgument, scopeOfUses, type TopologyRequirement, validateBackend, validateSnapshotId, validateVolumeId, volumeIdForName } from '../shared/index.js';
import { accessRequestOf, parseCapabilities } from './capabilities.js';
import { DEFAULT_SIZE_BYTES, parseRange } from './capacity.js';
import { toCsiVolume } from './convert.js';
import type { CreateVolumeRequest, CreateVolumeResponse, Topology, VolumeContentSource } from './csi-types.js';
import { CREATE_KEYS, pluginKeys } from './parameters.js';

/** CreateVolume translated to the core's createVolume (shared/core/volumes.ts). */
export async function createVolumeRpc(core: Core, req: CreateVolumeRequest): Promise<CreateVolumeResponse> {
  const id = volumeIdForName(req.name, 'name');
  const requests = parseCapabilities(req.volume_capabilities).map(accessRequestOf);
  const params = pluginKeys(req.parameters, 'parameters', CREATE_KEYS);
  const backend = validateBackend(params.backend ?? 'block');
  const traits = backendTraits(backend);
  // Where twinvol makes the filesystem, a mount capability may choose its type; elsewhere only the
  // parameters speak, and the backend decides what a type means (shared/backends/*.ts).
  const fsType = traits.makesFilesystem ? fsTypeOfUses(params.fsType, requests) : params.fsType;
  // The range as asked, and twinvol's size for none: the core sizes the volume, a copy by its source too.
  const { required, limit } = parseRange(req.capacity_range);
  const { volume } = await createVolume(core, {
    id,
    name: req.name,
    backend,
    capacityBytes: required,
    limitBytes: limit,
    defaultBytes: traits.ownsData ? DEFAULT_SIZE_BYTES : 0,
    fsType,
    access: scopeOfUses(requests),
    source: params.source,
    mountOptions: params.mountOptions,
    parameters: params,
    contentSource: contentSourceOf(req.volume_content_source),
    createdBy: 'csi',
    accessRequests: requests,
    topologyRequirement: requirementOf(req.accessibility_requirements),
  });
  return { volume: toCsiVolume(volume) };
}

/** The requirement in the core's terms; the core checks it (shared/core/placement.ts). */
function requirementOf(req: { requisite: Topology[]; preferred: Topology[] } | null | undefined): TopologyRequirement | undefined {
  if (!req) return undefined;
  const segments = (list: Topology[] | undefined) => (list ?? []).map((t) => t?.segments ?? {});
  return { requisite: segments(req.requisite), preferred: segments(req.preferred) };
}

function contentSourceOf(src: VolumeContentSource | null | undefined): ContentSource | undefined {
  if (!src) return undefined;
  if (src.snapshot) return { kind: 'snapshot', id: validateSnapshotId(src.snapshot.snapshot_id, 'volume_content_source.snapshot.snapshot_id') };
  if (src.volume) return { kind: 'volume', id: validateVolumeId(src.volume.volume_id, 'volume_content_source.volume.volume_id') };
  throw invalidArgument('volume_content_source must name a snapshot or a volume');
}
