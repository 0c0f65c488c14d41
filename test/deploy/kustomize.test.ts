// deploy/ as `kubectl apply -k` sends it: rendered by kubectl's own kustomize (offline), every object
// valid and consistent, and the kubelet dir one setting: changed in settings.yaml, or by an overlay
// as settings.yaml describes, it changes everywhere and nothing is left at the default.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { consistencyProblems } from './checks.js';
import { DEPLOY, type JsonObject, loadManifests } from './load.js';
import { settingsKubeletDir } from './pod-checks.js';
import { render, renderedSet, scratchCopy, writeKubeletDirOverlay } from './kustomize.js';
import { schemaProblems } from './schema.js';

const DEFAULT_KUBELET_DIR = '/var/lib/kubelet';
const OTHER_KUBELET_DIR = '/var/lib/k0s/kubelet';

/** Every string anywhere in the rendered objects. */
function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(stringsIn);
  return [];
}

/** Valid, consistent, and with kubeletDir everywhere a kubelet dir is meant. */
function expectSound(docs: JsonObject[], kubeletDir: string): void {
  expect(docs.flatMap(schemaProblems)).toEqual([]);
  expect(consistencyProblems(renderedSet(docs))).toEqual([]);
  expect(settingsKubeletDir(docs)).toBe(kubeletDir);
}

/** Strings that hold a kubelet dir other than `kubeletDir` (the FlexVolume dir is another thing). */
const strayKubeletDirs = (docs: JsonObject[], kubeletDir: string) =>
  stringsIn(docs).filter((s) => s.includes(DEFAULT_KUBELET_DIR) && !s.includes(kubeletDir));

let cleanup: (() => void) | undefined;
afterEach(() => {
  cleanup?.();
  cleanup = undefined;
});

describe('kubectl kustomize deploy/', () => {
  it('renders every object of deploy/ into the twinvol namespace, valid and consistent', () => {
    const docs = render(DEPLOY);
    const own = loadManifests().docs.filter((m) => !m.file.startsWith('examples/'));
    expect(docs).toHaveLength(own.length);
    expectSound(docs, DEFAULT_KUBELET_DIR);
    const namespaced = docs.filter((d) => !['Namespace', 'CSIDriver', 'ClusterRole', 'ClusterRoleBinding', 'StorageClass', 'VolumeSnapshotClass'].includes(String(d.kind)));
    expect(namespaced.map((d) => (d.metadata as JsonObject).namespace)).toEqual(namespaced.map(() => 'twinvol'));
  });

  it('a kubelet dir changed in settings.yaml changes it everywhere', () => {
    const scratch = scratchCopy();
    cleanup = scratch.remove;
    const settings = join(scratch.base, 'settings.yaml');
    writeFileSync(settings, readFileSync(settings, 'utf8').replace(`kubeletDir: ${DEFAULT_KUBELET_DIR}`, `kubeletDir: ${OTHER_KUBELET_DIR}`));
    const docs = render(scratch.base);
    expectSound(docs, OTHER_KUBELET_DIR);
    expect(strayKubeletDirs(docs, OTHER_KUBELET_DIR)).toEqual([]);
    expect(stringsIn(docs).filter((s) => s.startsWith(OTHER_KUBELET_DIR))).toHaveLength(5);
  });

  it('a kubelet dir changed by an overlay, as settings.yaml describes, changes it everywhere', () => {
    const scratch = scratchCopy();
    cleanup = scratch.remove;
    const docs = render(writeKubeletDirOverlay(scratch.dir, OTHER_KUBELET_DIR));
    expectSound(docs, OTHER_KUBELET_DIR);
    expect(strayKubeletDirs(docs, OTHER_KUBELET_DIR)).toEqual([]);
  });

  it('without the replacements, the same edit leaves the default behind and the checks say so', () => {
    const scratch = scratchCopy();
    cleanup = scratch.remove;
    const kustomization = join(scratch.base, 'kustomization.yaml');
    writeFileSync(kustomization, readFileSync(kustomization, 'utf8').replace(/^replacements:[\s\S]*$/m, ''));
    const settings = join(scratch.base, 'settings.yaml');
    writeFileSync(settings, readFileSync(settings, 'utf8').replace(`kubeletDir: ${DEFAULT_KUBELET_DIR}`, `kubeletDir: ${OTHER_KUBELET_DIR}`));
    const docs = render(scratch.base);
    expect(strayKubeletDirs(docs, OTHER_KUBELET_DIR).length).toBeGreaterThan(0);
    expect(consistencyProblems(renderedSet(docs))).toContainEqual(expect.stringMatching(/--kubelet-dir \/var\/lib\/kubelet is not the kubelet dir \/var\/lib\/k0s\/kubelet/));
  });

  it('the exec backend example renders, and is valid', () => {
    const docs = render(join(DEPLOY, 'examples/exec-backend'));
    expect(docs.map((d) => d.kind).sort()).toEqual(['PersistentVolume', 'StorageClass']);
    expect(docs.flatMap(schemaProblems)).toEqual([]);
  });
});
