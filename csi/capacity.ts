import { availableCapacity, type Core, invalidArgument, type SizeRange, sizeInRange, validateBackend } from '../shared/index.js';
import { accessRequestOf, parseCapabilities } from './capabilities.js';
import type { CapacityRange, GetCapacityRequest, GetCapacityResponse } from './csi-types.js';
import { CREATE_KEYS, pluginKeys } from './parameters.js';

/** Conformance suites assume it, and a sparse image makes it free until written. */
export const DEFAULT_SIZE_BYTES = 10 * 2 ** 30;

function int64(value: string, what: string): number {
  if (!/^-?[0-9]{1,19}$/.test(value)) throw invalidArgument(`${what} is not an integer`);
  const n = Number(value);
  if (n < 0) throw invalidArgument(`${what} must not be negative`);
  return n;
}

/** A capacity_range's two int64 strings (absent: nothing asked). */
export function parseRange(range: CapacityRange | null | undefined): SizeRange {
  if (!range) return { required: 0, limit: 0 };
  return { required: int64(range.required_bytes, 'capacity_range.required_bytes'), limit: int64(range.limit_bytes, 'capacity_range.limit_bytes') };
}

/** The size a capacity range asks for, by the core's one rule (shared/size.ts `sizeInRange`). */
export function sizeFromRange(range: CapacityRange | null | undefined, fallback: number, alignment: number): number {
  return sizeInRange(parseRange(range), fallback, alignment);
}

/**
 * GetCapacity translated to the core's availableCapacity (shared/core/capacity.ts): the parameters as
 * CreateVolume reads them, the capabilities as the uses, the topology as it came.
 */
export async function capacityRpc(core: Core, req: GetCapacityRequest): Promise<GetCapacityResponse> {
  const params = pluginKeys(req.parameters, 'parameters', CREATE_KEYS);
  const caps = req.volume_capabilities.length ? parseCapabilities(req.volume_capabilities) : [];
  const bytes = await availableCapacity(core, {
    backend: validateBackend(params.backend ?? 'block'),
    described: { fsType: params.fsType, source: params.source, mountOptions: params.mountOptions, parameters: params, createdBy: 'csi' },
    requests: caps.map(accessRequestOf),
    topology: req.accessible_topology?.segments,
  });
  return { available_capacity: String(bytes), maximum_volume_size: null, minimum_volume_size: null };
}
