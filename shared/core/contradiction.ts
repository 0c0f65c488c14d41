import { invalidArgument } from '../errors.js';
import type { VolumeRecord } from '../model.js';
import { quoted } from '../validate.js';

/**
 * Keys a request might use to say what to mount (compared lower-cased), with the catalog's own value.
 * `path` and `device` have none: the catalog alone decides where data comes from.
 */
const DESCRIBED: Record<string, (v: VolumeRecord) => string | undefined> = {
  volumeid: (v) => v.id,
  backend: (v) => v.backend,
  fstype: (v) => v.fsType,
  source: (v) => v.source,
  mountoptions: (v) => v.mountOptions?.join(','),
  path: () => undefined,
  device: () => undefined,
};

/**
 * Request maps (FlexVolume PV options, CSI volume_context) are written by whoever can write a PV; what
 * is mounted comes from the catalog only. A map may repeat the catalog's description of the volume,
 * never contradict it, so it can never point a mount at another source, path, backend or type. An
 * empty value claims nothing. Returns why the map is refused, or undefined.
 */
export function contradiction(
  volume: VolumeRecord,
  claims: Readonly<Record<string, string>>,
  what: string,
  implied: Readonly<Record<string, string>> = {},
): string | undefined {
  const refused = (key: string) => `${what} ${quoted(key, 64)} does not match volume ${volume.id}: what is mounted comes from the catalog, not the request`;
  // Only the table's own keys: "__proto__" or "constructor" must not reach Object.prototype's members.
  const described = (key: string) => (Object.hasOwn(DESCRIBED, key.toLowerCase()) ? DESCRIBED[key.toLowerCase()] : undefined);
  for (const [key, value] of Object.entries(claims)) {
    const own = described(key);
    if (own && value !== '' && own(volume) !== value) return refused(key);
  }
  for (const [key, value] of Object.entries(implied)) {
    const own = described(key)?.(volume);
    if (own && value !== '' && !Object.hasOwn(claims, key) && own !== value) return refused(key);
  }
  return undefined;
}

/** A request's map and what its keys are called in the request's own protocol, for the message. */
export interface Claims {
  values: Readonly<Record<string, string>>;
  /** "option" (FlexVolume), "volume_context key" (CSI). */
  what: string;
  /**
   * Values the caller's platform filled in rather than the PV's writer (kubelet sets
   * kubernetes.io/fsType from the PV spec, as fsType): held against the catalog only where the volume
   * has that property itself, so a volume without a filesystem type (dir) is not refused for it.
   */
  implied?: Readonly<Record<string, string>>;
}

export function refuseContradiction(volume: VolumeRecord, claims: Claims): void {
  const why = contradiction(volume, claims.values, claims.what, claims.implied);
  if (why) throw invalidArgument(why);
}

