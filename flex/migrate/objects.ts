/**
 * Kubernetes objects as `kubectl get -o yaml|json` prints them, before anything is known of their
 * kind: plain JSON values, read through the small helpers below so that every refusal names the
 * object and the field (`PersistentVolume/data: spec.claimRef.namespace is missing`).
 */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** One object of the input and where it came from (for messages). */
export interface KubeObject {
  kind: string;
  apiVersion: string;
  name: string;
  /** "" for cluster-scoped objects. */
  namespace: string;
  doc: JsonObject;
  /** "file.yaml document 2", "file.yaml document 1 items[3]", "stdin document 1". */
  origin: string;
}

/** "Kind/name" or "Kind namespace/name", the way every message names an object. */
export function label(o: Pick<KubeObject, 'kind' | 'name' | 'namespace'>): string {
  return o.namespace ? `${o.kind} ${o.namespace}/${o.name}` : `${o.kind}/${o.name}`;
}

/** A problem with one object: its reason names the field, and the object is skipped. */
export class Refusal extends Error {}

/** The value at a dotted path, or undefined. */
export function at(doc: Json | undefined, path: string): Json | undefined {
  let value: Json | undefined = doc;
  for (const key of path.split('.')) {
    if (!isObject(value)) return undefined;
    value = value[key];
  }
  return value;
}

/** A reader bound to one object: each refusal names it and the field. */
export function fields(o: KubeObject) {
  const refuse = (message: string): never => {
    throw new Refusal(`${label(o)}: ${message}`);
  };
  const string = (path: string): string | undefined => {
    const v = at(o.doc, path);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') return refuse(`${path} must be a string`);
    return v;
  };
  return {
    refuse,
    string,
    requiredString: (path: string, why = ''): string => {
      const v = string(path);
      if (v === undefined || v === '') return refuse(`${path} is missing${why ? ` (${why})` : ''}`);
      return v;
    },
    object: (path: string): JsonObject | undefined => {
      const v = at(o.doc, path);
      if (v === undefined || v === null) return undefined;
      if (!isObject(v)) return refuse(`${path} must be a mapping`);
      return v;
    },
    stringMap: (path: string): Record<string, string> => {
      const v = at(o.doc, path);
      if (v === undefined || v === null) return {};
      if (!isObject(v)) return refuse(`${path} must be a mapping of strings`);
      const out: Record<string, string> = {};
      for (const [k, value] of Object.entries(v)) {
        if (typeof value !== 'string') return refuse(`${path}.${k} must be a string`);
        out[k] = value;
      }
      return out;
    },
    stringList: (path: string): string[] | undefined => {
      const v = at(o.doc, path);
      if (v === undefined || v === null) return undefined;
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) return refuse(`${path} must be a list of strings`);
      return v as string[];
    },
    boolean: (path: string): boolean => {
      const v = at(o.doc, path);
      if (v === undefined || v === null) return false;
      if (typeof v !== 'boolean') return refuse(`${path} must be true or false`);
      return v;
    },
  };
}

/** A deep copy (the input is never changed in place). */
export function copy<T extends Json>(value: T): T {
  return structuredClone(value);
}

/** The keys `kubectl get` adds that say nothing the API server would accept back. */
const SERVER_METADATA = ['uid', 'resourceVersion', 'creationTimestamp', 'managedFields', 'generation', 'selfLink', 'deletionTimestamp', 'deletionGracePeriodSeconds'];
/** Annotations the controllers and kubectl write: on a re-created object they would describe the old one. */
const SERVER_ANNOTATIONS = [
  'kubectl.kubernetes.io/last-applied-configuration',
  'pv.kubernetes.io/bind-completed',
  'pv.kubernetes.io/bound-by-controller',
  'pv.kubernetes.io/migrated-to',
  'volume.kubernetes.io/selected-node',
  'deployment.kubernetes.io/revision',
];

/**
 * An object as it can be applied again: status gone, and the server's bookkeeping in metadata (uid,
 * resourceVersion, creationTimestamp, managedFields, ...) and a PV's claimRef uid and resourceVersion,
 * which would name the claim that was deleted and leave the PV Released instead of bindable.
 */
export function cleaned(doc: JsonObject): JsonObject {
  const out = copy(doc);
  delete out.status;
  const meta = out.metadata;
  if (isObject(meta)) {
    for (const key of SERVER_METADATA) delete meta[key];
    const ann = meta.annotations;
    if (isObject(ann)) {
      for (const key of SERVER_ANNOTATIONS) delete ann[key];
      if (!Object.keys(ann).length) delete meta.annotations;
    }
  }
  const claimRef = at(out, 'spec.claimRef');
  if (out.kind === 'PersistentVolume' && isObject(claimRef)) {
    delete claimRef.uid;
    delete claimRef.resourceVersion;
  }
  return out;
}
