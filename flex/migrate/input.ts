import { readFileSync } from 'node:fs';
import { errnoCode } from '../../shared/index.js';
import { parseAllDocuments } from 'yaml';
import { isObject, type Json, type JsonObject, type KubeObject } from './objects.js';

/**
 * What `twinvol migrate plan` reads: whatever `kubectl get pv,pvc,pods,deploy,sts,ds,cronjobs,secrets -A -o
 * yaml` (or `-o json`) prints, in any number of files or on stdin: a `List` (or any `*List` kind with
 * `items`), single objects, multi-document YAML. JSON is read by the same parser (YAML 1.2 holds
 * JSON). An input that does not parse, or a document that is not a Kubernetes object, is a usage
 * error: nothing is planned from half an input.
 */
export class InputError extends Error {}

export interface Source {
  /** The name messages use: the path, or "stdin". */
  name: string;
  text: string;
}

/** Reads each argument (`-` is stdin, read once); a file that cannot be read is an InputError. */
export function readSources(paths: readonly string[], stdin: () => string): Source[] {
  return paths.map((path) => {
    if (path === '-') return { name: 'stdin', text: stdin() };
    // An unset variable, quoted: readFileSync('') is ENOENT, which read as ": cannot be read".
    if (path === '') throw new InputError('an input file is named by an empty word: name a file, or - for stdin');
    try {
      return { name: path, text: readFileSync(path, 'utf8') };
    } catch (err) {
      const code = errnoCode(err);
      throw new InputError(`${path}: cannot be read (${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a directory' : (code ?? String(err))})`);
    }
  });
}

/** Every object of every source, Lists flattened, in input order. */
export function parseSources(sources: readonly Source[]): KubeObject[] {
  return sources.flatMap(parseSource);
}

function parseSource(source: Source): KubeObject[] {
  const objects: KubeObject[] = [];
  const docs = parseAllDocuments(source.text);
  docs.forEach((doc, i) => {
    const where = `${source.name} document ${i + 1}`;
    const problem = doc.errors[0];
    if (problem) {
      const line = problem.linePos?.[0];
      throw new InputError(`${where}: not YAML or JSON${line ? ` (line ${line.line}, column ${line.col})` : ''}: ${firstLine(problem.message)}`);
    }
    let value: Json | undefined;
    try {
      // Aliases are resolved here, not while parsing: an alias to no anchor (or a billion laughs
      // past maxAliasCount) throws from toJS.
      value = doc.toJS({ maxAliasCount: 100 }) as Json | undefined;
    } catch (err) {
      throw new InputError(`${where}: not YAML or JSON: ${firstLine(err instanceof Error ? err.message : String(err))}`);
    }
    // An empty document (a stray "---", kubectl's trailing separator) holds nothing.
    if (value === null || value === undefined) return;
    collect(value, where, objects);
  });
  return objects;
}

function collect(value: Json, where: string, into: KubeObject[]): void {
  if (!isObject(value)) throw new InputError(`${where}: not a Kubernetes object (a ${Array.isArray(value) ? 'list' : typeof value}, not a mapping with kind and metadata)`);
  const kind = value.kind;
  if (typeof kind !== 'string' || kind === '') throw new InputError(`${where}: not a Kubernetes object: kind is missing`);
  if (kind === 'List' || (kind.endsWith('List') && Array.isArray(value.items))) {
    const items = value.items;
    if (!Array.isArray(items)) throw new InputError(`${where}: ${kind}.items must be a list`);
    items.forEach((item, n) => collect(item, `${where} items[${n}]`, into));
    return;
  }
  into.push(objectOf(value, kind, where));
}

function objectOf(doc: JsonObject, kind: string, where: string): KubeObject {
  const apiVersion = doc.apiVersion;
  if (typeof apiVersion !== 'string' || apiVersion === '') throw new InputError(`${where}: ${kind}: apiVersion is missing`);
  const meta = doc.metadata;
  if (!isObject(meta)) throw new InputError(`${where}: ${kind}: metadata is missing`);
  const name = meta.name;
  if (typeof name !== 'string' || name === '') throw new InputError(`${where}: ${kind}: metadata.name is missing`);
  const namespace = meta.namespace ?? '';
  if (typeof namespace !== 'string') throw new InputError(`${where}: ${kind}/${name}: metadata.namespace must be a string`);
  // The names the plan writes into manifests and shell scripts are held to the API server's own rules:
  // anything else is not an object kubectl printed, and a name like web$(touch x) once reached a script.
  if (isPlanned(kind)) {
    if (!DNS_SUBDOMAIN.test(name)) throw new InputError(`${where}: ${kind} ${JSON.stringify(name.slice(0, 64))}: metadata.name is not a Kubernetes object name (lower-case letters, digits, "-" and ".", at most 253)`);
    if (namespace !== '' && !DNS_LABEL.test(namespace))
      throw new InputError(`${where}: ${kind}/${name}: metadata.namespace ${JSON.stringify(namespace.slice(0, 64))} is not a namespace name (lower-case letters, digits and "-", at most 63)`);
  }
  return { kind, apiVersion, name, namespace, doc, origin: where };
}

/** RFC 1123 names as Kubernetes checks them: a subdomain for most objects, a label for a namespace. */
export const DNS_LABEL = /^(?=.{1,63}$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/;

/** The kinds the plan reads and writes about; other kinds (RBAC's "system:..." names) pass as they are. */
const isPlanned = (kind: string) => kind === 'PersistentVolume' || kind === 'PersistentVolumeClaim' || kind === 'Secret' || POD_SPEC_PATHS[kind] !== undefined;

// The parser's first line ends with its own "at line L, column C:", which the message already gives.
const firstLine = (text: string) => (text.split('\n')[0] ?? text).trim().replace(/ at line \d+, column \d+:?$/, '');

/** The objects by kind, and lookups by namespace and name. */
export interface Inventory {
  pvs: KubeObject[];
  claims: Map<string, KubeObject>;
  secrets: Map<string, KubeObject>;
  /** Pods and the controllers whose pod template may name a claim or hold an inline flexVolume. */
  workloads: KubeObject[];
  /** Objects of other kinds, which the plan leaves alone. */
  ignored: KubeObject[];
}

export const nsKey = (namespace: string, name: string) => `${namespace}/${name}`;

/** Kinds whose pods mount volumes: the pod spec's path in each. */
export const POD_SPEC_PATHS: Readonly<Record<string, string>> = {
  Pod: 'spec',
  Deployment: 'spec.template.spec',
  StatefulSet: 'spec.template.spec',
  DaemonSet: 'spec.template.spec',
  ReplicaSet: 'spec.template.spec',
  ReplicationController: 'spec.template.spec',
  Job: 'spec.template.spec',
  CronJob: 'spec.jobTemplate.spec.template.spec',
};

export function inventory(objects: readonly KubeObject[]): Inventory {
  const inv: Inventory = { pvs: [], claims: new Map(), secrets: new Map(), workloads: [], ignored: [] };
  const seen = new Set<string>();
  for (const o of objects) {
    // The same object listed twice (two overlapping kubectl outputs) counts once; its first copy wins.
    const key = `${o.kind}/${o.namespace}/${o.name}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (o.kind === 'PersistentVolume') inv.pvs.push(o);
    else if (o.kind === 'PersistentVolumeClaim') inv.claims.set(nsKey(o.namespace, o.name), o);
    else if (o.kind === 'Secret') inv.secrets.set(nsKey(o.namespace, o.name), o);
    else if (POD_SPEC_PATHS[o.kind]) inv.workloads.push(o);
    else inv.ignored.push(o);
  }
  return inv;
}

/** The label on a Secret the plan copies, naming the one it was copied from (flex/migrate/targets.ts). */
export const COPY_OF_LABEL = 'migrate.twinvol.io/from-secret';

/** A Secret of the input: undefined if none, else what it is a copy of ("" for none). */
export function secretInInput(inv: Inventory, namespace: string, name: string): string | undefined {
  const object = inv.secrets.get(nsKey(namespace, name));
  if (!object) return undefined;
  const meta = object.doc.metadata;
  const labels = isObject(meta) && isObject(meta.labels) ? meta.labels : {};
  const from = labels[COPY_OF_LABEL];
  return typeof from === 'string' ? from : '';
}
