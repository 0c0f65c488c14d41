import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { DEPLOY, type JsonObject, type ManifestSet, parseYaml } from './load.js';

/**
 * `kubectl kustomize DIR`: what `kubectl apply -k DIR` would send, rendered offline by the kustomize
 * built into kubectl (no cluster is contacted). kubectl ships with this project's machine image.
 */
export function render(dir: string): JsonObject[] {
  const out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
  return parseYaml(out, `kubectl kustomize ${dir}`);
}

/** A rendered set as the checks read it: no files, no kustomizations (those are checked on the tree). */
export function renderedSet(docs: JsonObject[]): ManifestSet {
  return { docs: docs.map((doc, index) => ({ file: 'rendered.yaml', index, doc })), kustomizations: [], files: [] };
}

/** A scratch directory holding a copy of deploy/ as `base/`; removed by `remove`. */
export function scratchCopy(): { dir: string; base: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'twinvol-deploy-'));
  const base = join(dir, 'base');
  cpSync(DEPLOY, base, { recursive: true });
  return { dir, base, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** deploy/kustomization.yaml's replacements: an overlay that changes a setting repeats them. */
export function baseReplacements(): unknown {
  return parseYaml(readFileSync(join(DEPLOY, 'kustomization.yaml'), 'utf8'), 'kustomization.yaml')[0]?.replacements;
}

/**
 * An overlay over `base/` that sets another kubelet dir the way deploy/settings.yaml tells an
 * operator to: a patch of the twinvol-settings ConfigMap, and the base's replacements repeated (a
 * base's replacements run before the overlay's patches).
 */
export function writeKubeletDirOverlay(dir: string, kubeletDir: string): string {
  const overlay = join(dir, 'overlay');
  const patch = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'twinvol-settings', namespace: 'twinvol' }, data: { kubeletDir } };
  const kustomization = {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: ['../base'],
    patches: [{ patch: stringify(patch) }],
    replacements: baseReplacements(),
  };
  mkdirSync(overlay);
  writeFileSync(join(overlay, 'kustomization.yaml'), stringify(kustomization));
  return overlay;
}

/** An overlay over `base/` using a component of it (a path under deploy/), as an operator's own overlay would. */
export function writeComponentOverlay(dir: string, component: string): string {
  const overlay = join(dir, 'overlay');
  mkdirSync(overlay);
  const kustomization = { apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', resources: ['../base'], components: [`../base/${component}`] };
  writeFileSync(join(overlay, 'kustomization.yaml'), stringify(kustomization));
  return overlay;
}
