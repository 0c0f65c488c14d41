import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';

/** A parsed YAML value: what a manifest is before its schema says more. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export const REPO = resolve(import.meta.dirname, '../..');
export const DEPLOY = join(REPO, 'deploy');

/** One YAML document of one file; `file` is relative to deploy/. */
export interface Manifest {
  file: string;
  index: number;
  doc: JsonObject;
}

/** A directory's kustomization.yaml, as far as the checks read it. */
export interface Kustomization {
  /** The directory, relative to deploy/ ("" for deploy/ itself). */
  dir: string;
  resources: string[];
  doc: JsonObject;
}

/** Everything under a deploy/ tree: the documents, the kustomizations, and every YAML file's path. */
export interface ManifestSet {
  docs: Manifest[];
  kustomizations: Kustomization[];
  files: string[];
}

export function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Every document of one YAML text; a syntax error, a warning or an empty document is an error. */
export function parseYaml(text: string, what: string): JsonObject[] {
  return parseAllDocuments(text).map((doc, i) => {
    const problems = [...doc.errors, ...doc.warnings];
    if (problems.length) throw new Error(`${what} document ${i}: ${problems.map((p) => p.message).join('; ')}`);
    const value = doc.toJS() as Json;
    if (!isObject(value)) throw new Error(`${what} document ${i} is not a mapping`);
    return value;
  });
}

function yamlFiles(root: string, dir = root): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return yamlFiles(root, path);
    return /\.ya?ml$/.test(e.name) ? [relative(root, path)] : [];
  });
}

const isKustomization = (file: string) => /(^|\/)kustomization\.ya?ml$/.test(file);

/** Loads a deploy/ tree (the repository's, or a copy a test made). */
export function loadManifests(root = DEPLOY): ManifestSet {
  const files = yamlFiles(root).sort();
  const docs: Manifest[] = [];
  const kustomizations: Kustomization[] = [];
  for (const file of files) {
    const parsed = parseYaml(readFileSync(join(root, file), 'utf8'), file);
    if (isKustomization(file)) {
      const doc = parsed[0];
      if (parsed.length !== 1 || !doc) throw new Error(`${file} must hold one document`);
      const resources = Array.isArray(doc.resources) ? doc.resources.map(String) : [];
      kustomizations.push({ dir: file.includes('/') ? file.slice(0, file.lastIndexOf('/')) : '', resources, doc });
    } else {
      parsed.forEach((doc, index) => docs.push({ file, index, doc }));
    }
  }
  return { docs, kustomizations, files };
}

/** "Kind/name", the way problems name a document. */
export function nameOf(doc: JsonObject): string {
  const meta = doc.metadata;
  return `${String(doc.kind)}/${isObject(meta) ? String(meta.name) : '?'}`;
}
