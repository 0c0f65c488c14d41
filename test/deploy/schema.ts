import { ObjectMeta } from '@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta';
import * as apps from 'kubernetes-models/apps/v1';
import * as rbac from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import * as storage from 'kubernetes-models/storage.k8s.io/v1';
import * as core from 'kubernetes-models/v1';
import { isObject, type JsonObject, nameOf } from './load.js';

/** A kubernetes-models class: built from a manifest, `validate()` throws what the schema refuses. */
interface Validatable {
  validate(): void;
}
interface ModelClass {
  new (data: JsonObject): Validatable;
  apiVersion: string;
  kind: string;
}

function isModelClass(value: unknown): value is ModelClass {
  return typeof value === 'function' && typeof (value as { apiVersion?: unknown }).apiVersion === 'string' && typeof (value as { kind?: unknown }).kind === 'string';
}

/** Every kind of the API groups deploy/ uses, by "apiVersion kind". */
const MODELS = new Map<string, ModelClass>(
  [core, apps, rbac, storage].flatMap((mod) => Object.values(mod).filter(isModelClass)).map((c) => [`${c.apiVersion} ${c.kind}`, c]),
);

/**
 * Runs a model's own validator with every object of the manifest behind a proxy that records which
 * keys the validator reads. The generated validators (ajv, compiled from the OpenAPI schema) read
 * every property their schema declares and every key of a map, so a key of the manifest that nothing
 * read is one the schema does not know: a misspelt field, which the API server's strict field
 * validation (kubectl's default) refuses but the validator alone lets through.
 */
function validateStrictly(model: Validatable, root: JsonObject): string[] {
  const read = new Map<object, { path: string; keys: Set<string> }>();
  const proxies = new WeakMap<object, object>();
  const wrap = (value: unknown, path: string): unknown => {
    if (typeof value !== 'object' || value === null) return value;
    const known = proxies.get(value);
    if (known) return known;
    const keys = new Set<string>();
    read.set(value, { path, keys });
    const proxy = new Proxy(value, {
      get(target, key, receiver) {
        const got: unknown = Reflect.get(target, key, receiver);
        if (typeof key !== 'string' || !Object.hasOwn(target, key)) return got;
        keys.add(key);
        return wrap(got, `${path}.${key}`);
      },
      has(target, key) {
        if (typeof key === 'string') keys.add(key);
        return Reflect.has(target, key);
      },
    });
    proxies.set(value, proxy);
    return proxy;
  };
  try {
    model.validate.call(wrap(model, ''));
  } catch (err) {
    return [`${nameOf(root)}: ${err instanceof Error ? err.message : String(err)}`];
  }
  const unknown: string[] = [];
  for (const [object, { path, keys }] of read)
    for (const key of Object.keys(object)) if (!keys.has(key)) unknown.push(`${nameOf(root)}: unknown field ${path.slice(1) ? `${path.slice(1)}.` : ''}${key}`);
  return unknown;
}

/**
 * VolumeSnapshotClass (snapshot.storage.k8s.io/v1) is a CRD that no kubernetes-models package covers;
 * checked by hand against its CRD schema (external-snapshotter v8.6.0,
 * client/config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml): these fields only, `driver`
 * and `deletionPolicy` required, deletionPolicy Delete or Retain, parameters a map of strings,
 * metadata an ObjectMeta.
 */
function validateVolumeSnapshotClass(doc: JsonObject): string[] {
  const problems: string[] = [];
  const say = (what: string) => problems.push(`${nameOf(doc)}: ${what}`);
  const fields = ['apiVersion', 'kind', 'metadata', 'driver', 'deletionPolicy', 'parameters'];
  for (const key of Object.keys(doc)) if (!fields.includes(key)) say(`unknown field ${key}`);
  if (typeof doc.driver !== 'string' || doc.driver === '') say('driver must be a non-empty string');
  if (doc.deletionPolicy !== 'Delete' && doc.deletionPolicy !== 'Retain') say('deletionPolicy must be Delete or Retain');
  const params = doc.parameters;
  if (params !== undefined && (!isObject(params) || Object.values(params).some((v) => typeof v !== 'string'))) say('parameters must be a map of strings');
  if (!isObject(doc.metadata)) say('metadata is required');
  else problems.push(...validateStrictly(new ObjectMeta(doc.metadata), doc).map((p) => p.replace(': unknown field ', ': unknown field metadata.')));
  return problems;
}

/** What the Kubernetes schemas refuse in one manifest, offline; [] when it is valid. */
export function schemaProblems(doc: JsonObject): string[] {
  const key = `${String(doc.apiVersion)} ${String(doc.kind)}`;
  if (key === 'snapshot.storage.k8s.io/v1 VolumeSnapshotClass') return validateVolumeSnapshotClass(doc);
  const Model = MODELS.get(key);
  if (!Model) return [`${nameOf(doc)}: no schema for ${key}: add its model to test/deploy/schema.ts`];
  const problems = validateStrictly(new Model(doc), doc);
  if (!isObject(doc.metadata) || typeof doc.metadata.name !== 'string') problems.push(`${nameOf(doc)}: metadata.name is required`);
  return problems;
}
