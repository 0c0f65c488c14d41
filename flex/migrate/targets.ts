import { DEFAULT_CSI_DRIVER_NAME, EXEC_KEYS, parseDriverName, validateVolumeId } from '../../shared/index.js';
import { DRIVER_KEYS } from '../options.js';
import type { Mapping } from './mappings.js';
import type { JsonObject } from './objects.js';
import { COPY_OF_LABEL } from './input.js';

/** The CSI driver name twinvol-csi registers by default (deploy/csidriver.yaml; test/migrate/plan-golden.test.ts holds them equal). */
export const TWINVOL_CSI_DRIVER = DEFAULT_CSI_DRIVER_NAME;

/** twinvol's own FlexVolume driver, under whatever vendor it was installed (`install flex --vendor`). */
export const isTwinvolDriver = (driver: string) => /^[^/]+\/twinvol$/.test(driver);

/** A volume's flexVolume fields, from a PV or from a pod's inline volume. */
export interface FlexSource {
  driver: string;
  options: Record<string, string>;
  fsType: string;
  readOnly: boolean;
  /** The secret's name and namespace (the namespace kubelet would read it from), if any. */
  secret?: { name: string; namespace: string };
  /** The secret's data (base64 values) when the input holds it. */
  secretData?: Record<string, string>;
  /** The PV name, or the inline volume's name: kubelet's kubernetes.io/pvOrVolumeName. */
  name: string;
  /**
   * Whether the input holds a Secret of this name: undefined if not, else the Secret it is a copy of
   * (its COPY_OF_LABEL), or "" for a Secret of someone else's.
   */
  secretInInput?: (namespace: string, name: string) => string | undefined;
}


/** What a volume becomes under CSI. */
export interface CsiTarget {
  /** "twinvol", "exec" or the vendor driver's name: how the report names the route. */
  route: string;
  driver: string;
  volumeHandle: string;
  fsType: string;
  readOnly: boolean;
  attributes: Record<string, string>;
  secretRef?: { placement: 'nodeStage' | 'nodePublish'; name: string; namespace: string };
  mountOptions: string[];
  /** A Secret to create beside the PV (the CSI driver's key names). */
  newSecret?: JsonObject;
  /**
   * That copy, when it was not in the input: this plan makes it, so its rollback removes it. A copy
   * an earlier plan made may serve PVs moved then, and stays.
   */
  madeCopy?: { namespace: string; name: string; of: string };
  notes: string[];
}

/** What stops a volume from moving: the field it is about, and why. */
export class TargetRefusal extends Error {
  constructor(
    readonly field: string,
    why: string,
  ) {
    super(`${field}: ${why}`);
  }
}

const opt = (key: string) => `spec.flexVolume.options.${key}`;

function volumeId(value: string, field: string): string {
  try {
    return validateVolumeId(value, field);
  } catch (err) {
    throw new TargetRefusal(field, err instanceof Error ? err.message : String(err));
  }
}

/**
 * twinvol's own FlexVolume PV: the same catalog volume under twinvol-csi, so no data moves. The
 * volume is the `volumeId` option, else the PV name (flex/options.ts volumeIdOf). The options that
 * describe the volume (backend, fsType, source, mountOptions) can only repeat the catalog
 * (shared/core/contradiction.ts), so they go along as volumeAttributes and are checked again there.
 */
export function twinvolTarget(src: FlexSource): CsiTarget {
  const notes: string[] = [];
  for (const key of Object.keys(src.options))
    if (!key.startsWith('kubernetes.io/') && !(DRIVER_KEYS as readonly string[]).includes(key))
      throw new TargetRefusal(opt(key), `not an option twinvol reads (${DRIVER_KEYS.join(', ')}); the FlexVolume driver refuses it too`);
  const handle = volumeId(src.options.volumeId ?? src.name, src.options.volumeId === undefined ? 'metadata.name (the volume id when no volumeId option is set)' : opt('volumeId'));
  const attributes: Record<string, string> = {};
  for (const key of ['backend', 'fsType', 'source', 'mountOptions']) {
    const value = src.options[key];
    if (value) attributes[key] = value;
  }
  if (src.options.createIfMissing === 'true') notes.push(`createIfMissing: volume ${handle} must exist before the move (twinvol volume inspect ${handle}); twinvol-csi does not create a static PV's volume`);
  return {
    route: 'twinvol',
    driver: TWINVOL_CSI_DRIVER,
    volumeHandle: handle,
    fsType: src.fsType,
    readOnly: src.readOnly || src.options.readOnly === 'true',
    attributes,
    ...(src.secret ? { secretRef: { placement: 'nodePublish' as const, ...src.secret } } : {}),
    mountOptions: [],
    notes,
  };
}

/**
 * Any other FlexVolume driver behind twinvol-csi's exec backend (docs/exec-backend.md, "The exec
 * backend"): the same driver file, called by the CSI server as kubelet called it. The volumeHandle is
 * the PV name, because the exec backend passes the volume id as kubernetes.io/pvOrVolumeName, which
 * kubelet filled with the PV name: the driver sees the name it always saw. The secret becomes the
 * node publish secret, which the exec backend hands to the driver's `mount` as kubernetes.io/secret/<key>.
 */
export function execTarget(src: FlexSource): CsiTarget {
  try {
    parseDriverName(src.driver, 'driver');
  } catch (err) {
    throw new TargetRefusal('spec.flexVolume.driver', `${err instanceof Error ? err.message : String(err)}: no mapping, and the exec backend finds drivers only by <vendor>/<name>`);
  }
  for (const key of Object.keys(src.options))
    if ((EXEC_KEYS as readonly string[]).includes(key) || key.startsWith('csi.storage.k8s.io/'))
      throw new TargetRefusal(opt(key), `the exec backend's volumeAttributes use this key themselves (${EXEC_KEYS.join(', ')}, csi.storage.k8s.io/*), so the option cannot travel with them; use a mapping`);
  return {
    route: 'exec',
    driver: TWINVOL_CSI_DRIVER,
    volumeHandle: volumeId(src.name, 'metadata.name (the exec volume id, sent to the driver as kubernetes.io/pvOrVolumeName)'),
    fsType: src.fsType,
    readOnly: src.readOnly,
    attributes: { backend: 'exec', driver: src.driver, ...src.options },
    ...(src.secret ? { secretRef: { placement: 'nodePublish' as const, ...src.secret } } : {}),
    mountOptions: [],
    notes: [],
  };
}

/** The vendor's CSI driver, by a mapping (mappings.ts). */
export function vendorTarget(src: FlexSource, m: Mapping): CsiTarget {
  const notes: string[] = [];
  const attributes: Record<string, string> = { ...m.attributes };
  const mountOptions = [...m.addMountOptions];
  const cite = `(mapping ${m.match} -> ${m.driver}: ${m.source})`;
  for (const key of m.required) if (!src.options[key]) throw new TargetRefusal(opt(key), `is missing: ${m.driver} needs it ${cite}`);
  for (const [key, value] of Object.entries(src.options)) {
    const rename = m.options[key];
    const sep = m.mountOptions[key];
    const flag = m.flags[key];
    const switched = m.switches[key];
    if (rename) attributes[rename.to] = rename.prefix && !value.startsWith(rename.prefix) ? `${rename.prefix}${value}` : value;
    else if (sep !== undefined) mountOptions.push(...value.split(sep).map((s) => s.trim()).filter(Boolean));
    else if (flag !== undefined) mountOptions.push(`${flag}${value}`);
    else if (switched) mountOptions.push(...(switched[value.toLowerCase()] ?? []));
    else if (m.ignore[key] !== undefined) notes.push(`${opt(key)} dropped: ${m.ignore[key]}`);
    else if (!key.startsWith('kubernetes.io/')) throw new TargetRefusal(opt(key), `${m.driver} has no counterpart for this option ${cite}`);
  }
  let secretRef: CsiTarget['secretRef'];
  let newSecret: JsonObject | undefined;
  let madeCopy: CsiTarget['madeCopy'];
  if (src.secret) {
    const renames = Object.keys(m.secret.keys).length > 0;
    if (renames || Object.keys(m.secret.attributes).length) {
      const data = src.secretData;
      if (!data) throw new TargetRefusal('spec.flexVolume.secretRef', `names Secret ${src.secret.namespace}/${src.secret.name}, which is not in the input: ${m.driver} reads other keys, so its data is needed (kubectl get secret -n ${src.secret.namespace} ${src.secret.name} -o yaml)`);
      for (const [attribute, key] of Object.entries(m.secret.attributes)) {
        const value = data[key];
        if (value === undefined) throw new TargetRefusal('spec.flexVolume.secretRef', `Secret ${src.secret.namespace}/${src.secret.name} has no key ${key} (${m.driver} takes ${attribute} from it) ${cite}`);
        attributes[attribute] = Buffer.from(value, 'base64').toString('utf8');
      }
      if (renames) {
        const name = `${src.secret.name}-csi`;
        // Applying the copy would replace a Secret of that name that is not one: its owner's keys gone.
        const there = src.secretInInput?.(src.secret.namespace, name);
        if (there !== undefined && there !== src.secret.name)
          throw new TargetRefusal('spec.flexVolume.secretRef', `Secret ${src.secret.namespace}/${name}, the name of the copy with ${m.driver}'s keys, is taken by a Secret that is not a copy of ${src.secret.name}: applying the plan would replace it ${cite}`);
        if (there === undefined) madeCopy = { namespace: src.secret.namespace, name, of: src.secret.name };
        const renamed = Object.fromEntries(Object.entries(data).map(([k, v]) => [m.secret.keys[k] ?? k, v]));
        newSecret = {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name, namespace: src.secret.namespace, labels: { [COPY_OF_LABEL]: src.secret.name } },
          type: 'Opaque',
          data: renamed,
        };
        notes.push(`Secret ${src.secret.namespace}/${name}: a copy of ${src.secret.name} with ${m.driver}'s keys (${Object.entries(m.secret.keys).map(([a, b]) => `${a} -> ${b}`).join(', ')})`);
        secretRef = { placement: m.secret.placement, name, namespace: src.secret.namespace };
      }
    }
    secretRef ??= { placement: m.secret.placement, ...src.secret };
  } else if (m.secret.required) {
    throw new TargetRefusal('spec.flexVolume.secretRef', `is missing: ${m.driver} needs a ${m.secret.placement === 'nodeStage' ? 'node stage' : 'node publish'} secret ${cite}`);
  }
  if (m.fsType === 'drop' && src.fsType) notes.push(`spec.flexVolume.fsType ${src.fsType} dropped: ${m.driver} mounts its own filesystem type`);
  const volumeHandle = m.volumeHandle.replace(/\{([^}]*)\}/g, (_, key: string) => {
    const value = key === 'pv' ? src.name : attributes[key];
    if (value === undefined) throw new TargetRefusal('spec.flexVolume.options', `the mapping's volumeHandle names {${key}}, which is no volumeAttribute of this volume ${cite}`);
    return value;
  });
  return {
    route: m.driver,
    driver: m.driver,
    volumeHandle,
    fsType: m.fsType === 'keep' ? src.fsType : '',
    readOnly: src.readOnly,
    attributes,
    ...(secretRef ? { secretRef } : {}),
    mountOptions: [...new Set(mountOptions)],
    ...(newSecret ? { newSecret } : {}),
    ...(madeCopy ? { madeCopy } : {}),
    notes,
  };
}

/** The csi: block of a PV. */
export function csiPersistentSource(t: CsiTarget): JsonObject {
  return {
    driver: t.driver,
    volumeHandle: t.volumeHandle,
    ...(t.fsType ? { fsType: t.fsType } : {}),
    ...(t.readOnly ? { readOnly: true } : {}),
    ...(Object.keys(t.attributes).length ? { volumeAttributes: t.attributes } : {}),
    ...(t.secretRef ? { [`${t.secretRef.placement}SecretRef`]: { name: t.secretRef.name, namespace: t.secretRef.namespace } } : {}),
  };
}
