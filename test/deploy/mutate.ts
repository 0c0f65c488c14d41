import { isObject, type Json, type JsonObject, type ManifestSet } from './load.js';

/** A document of a (copied) set by kind and name; throws when absent, so a mutation never misses. */
export function docOf(set: ManifestSet, kind: string, name: string): JsonObject {
  const found = set.docs.find((m) => m.doc.kind === kind && isObject(m.doc.metadata) && m.doc.metadata.name === name);
  if (!found) throw new Error(`no ${kind}/${name}`);
  return found.doc;
}

/** The value at a dotted path ("spec.template.spec", "containers.0"), which must be an object. */
export function at(doc: JsonObject, path: string): JsonObject {
  let here: Json = doc;
  for (const key of path.split('.')) {
    here = Array.isArray(here) ? (here[Number(key)] ?? null) : isObject(here) ? (here[key] ?? null) : null;
    if (here === null) throw new Error(`nothing at ${path}`);
  }
  if (!isObject(here)) throw new Error(`${path} is not an object`);
  return here;
}

/** A container of a workload's pod template, by name. */
export function containerOf(set: ManifestSet, kind: string, name: string, container: string): JsonObject {
  const spec = at(docOf(set, kind, name), 'spec.template.spec');
  const found = (Array.isArray(spec.containers) ? spec.containers : []).find((c) => isObject(c) && c.name === container);
  if (!isObject(found)) throw new Error(`no container ${container} in ${kind}/${name}`);
  return found;
}

/** Replaces the arg that starts with `prefix` (a flag with its "="), which must be there. */
export function setArg(container: JsonObject, prefix: string, value: string | undefined): void {
  const args = Array.isArray(container.args) ? container.args : [];
  const i = args.findIndex((a) => typeof a === 'string' && a.startsWith(prefix));
  if (i < 0) throw new Error(`no arg ${prefix}`);
  if (value === undefined) args.splice(i, 1);
  else args[i] = value;
}

/** An array field of an object, which must be there. */
export function listAt(doc: JsonObject, path: string): Json[] {
  const [head, last] = [path.split('.').slice(0, -1).join('.'), path.split('.').pop() ?? ''];
  const parent = head ? at(doc, head) : doc;
  const list = parent[last];
  if (!Array.isArray(list)) throw new Error(`${path} is not a list`);
  return list;
}
