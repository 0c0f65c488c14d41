import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, expect } from 'vitest';
import { type MigratePlanArgs, runMigratePlan } from '../../flex/migrate/index.js';
import { isObject, type JsonObject } from '../deploy/load.js';
import { schemaProblems } from '../deploy/schema.js';

export const FIXTURES = resolve(import.meta.dirname, 'fixtures');
export const fixture = (name: string) => join(FIXTURES, name);

export interface PlanRun {
  exitCode: number;
  stdout: string;
  stderr: string;
  /** stdout's documents. */
  docs: JsonObject[];
}

/** `twinvol migrate plan` in this process (the bundled executable is run by plan-out.test.ts). */
export function planOf(args: Partial<MigratePlanArgs> & { files: string[] }, stdin = ''): PlanRun {
  let stdout = '';
  let stderr = '';
  const exitCode = runMigratePlan(
    { prefer: 'exec', mappings: [], exec: true, ...args },
    { stdin: () => stdin, stdout: (t) => (stdout += t), stderr: (t) => (stderr += t), stdinIsTerminal: false },
  );
  return { exitCode, stdout, stderr, docs: yamlDocs(stdout) };
}

export function yamlDocs(text: string): JsonObject[] {
  return parseAllDocuments(text).map((d) => {
    expect(d.errors).toEqual([]);
    const value = d.toJS() as JsonObject;
    expect(isObject(value)).toBe(true);
    return value;
  });
}

/** The documents of a fixture file (a List flattened), as the test reads them itself. */
export function fixtureObjects(name: string): JsonObject[] {
  return yamlDocs(readFileSync(fixture(name), 'utf8')).flatMap((d) => (d.kind === 'List' ? (d.items as JsonObject[]) : [d]));
}

/** The one document of a kind and name (and namespace); fails the test when there is not exactly one. */
export function only(docs: readonly JsonObject[], kind: string, name: string, namespace?: string): JsonObject {
  const found = docs.filter((d) => {
    const meta = d.metadata as JsonObject;
    return d.kind === kind && meta.name === name && (namespace === undefined || meta.namespace === namespace);
  });
  expect(found, `${kind} ${namespace ?? ''}/${name}`).toHaveLength(1);
  return found[0] as JsonObject;
}

/** Every object offline against the Kubernetes schemas (test/deploy/schema.ts: unknown fields refused too). */
export function expectValid(docs: readonly JsonObject[]): void {
  expect(docs.length).toBeGreaterThan(0);
  expect(docs.flatMap(schemaProblems)).toEqual([]);
}

/** The report lines on stderr that start with a word ("planned:", "skipped:", ...). */
export const linesOf = (stderr: string, word: string) =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith(`${word}: `))
    .map((l) => l.slice(word.length + 2));

/** A new PV's fields every move shares: Retain until the end, the annotations, the claim (no uid). */
export function pvShell(name: string, driver: string, policy: string, claim: [string, string] | undefined, spec: JsonObject, labels?: Record<string, string>): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: {
      name,
      ...(labels ? { labels } : {}),
      annotations: { 'migrate.twinvol.io/from-driver': driver, 'migrate.twinvol.io/reclaim-policy': policy },
    },
    spec: {
      ...spec,
      persistentVolumeReclaimPolicy: 'Retain',
      ...(claim ? { claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: claim[0], name: claim[1] } } : {}),
    },
  };
}

/**
 * A scratch directory for the whole file, with `script` installed as `bin/kubectl` (a fake kubectl
 * that a test's migrate.sh finds first on its PATH), removed after the file. Read `root` and `bin`
 * inside the tests: they are set before the first one runs.
 */
export function useFakeKubectl(prefix: string, script: string): { readonly root: string; readonly bin: string } {
  const world = { root: '', bin: '' };
  beforeAll(() => {
    world.root = mkdtempSync(join(tmpdir(), `twinvol-${prefix}-`));
    world.bin = join(world.root, 'bin');
    mkdirSync(world.bin);
    writeFileSync(join(world.bin, 'kubectl'), script, { mode: 0o755 });
  });
  afterAll(() => rmSync(world.root, { recursive: true, force: true }));
  return world;
}
