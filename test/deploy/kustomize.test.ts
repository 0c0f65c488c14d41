// deploy/ as `kubectl apply -k` sends it: rendered by kubectl's own kustomize (offline), every object
// valid and consistent, and the kubelet dir one setting: changed in settings.yaml, or by an overlay
// as settings.yaml describes, it changes everywhere and nothing is left at the default.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { consistencyProblems } from './checks.js';
import { DEPLOY, type JsonObject, loadManifests } from './load.js';
import { settingsKubeletDir } from './pod-checks.js';
import { render, renderedSet, scratchCopy, writeComponentOverlay, writeKubeletDirOverlay } from './kustomize.js';
import { at } from './mutate.js';
import { isPlugin, NODE_NAME, pluginFlags, workloads } from './pods.js';
import { checkConfigText } from '../../shared/config.js';
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

/**
 * The config the FlexVolume installer writes on a node, found by running its script up to the install
 * with a stand-in `twinvol` that records its argv, the env as kubelet would give it: the settings the
 * executable will read there, checked as `install flex --config` checks them.
 */
function installerConfig(docs: JsonObject[]): Record<string, unknown> {
  const installer = workloads(docs).find((w) => w.name === 'twinvol-flex-installer');
  const container = installer?.spec.containers[0];
  expect(container?.securityContext?.privileged).toBe(true);
  const script = String(container?.command?.at(-1));
  const upToInstall = script.slice(0, script.indexOf('\n', script.indexOf('twinvol install flex')));
  const dir = mkdtempSync('/tmp/twinvol-test-installer-');
  try {
    writeFileSync(join(dir, 'twinvol'), '#!/bin/sh\nfor a in "$@"; do printf \'%s\\n\' "$a"; done > "$(dirname "$0")/argv"\n', { mode: 0o755 });
    const env: Record<string, string> = { PATH: `${dir}:/usr/bin:/bin` };
    for (const e of container?.env ?? []) env[e.name] = e.value ?? (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName' ? NODE_NAME : '');
    execFileSync('/bin/sh', ['-c', upToInstall], { env });
    const argv = readFileSync(join(dir, 'argv'), 'utf8').split('\n');
    const text = argv[argv.indexOf('--config') + 1] ?? '';
    const checked = checkConfigText(text, '--config');
    expect({ kubeletDir: checked.kubeletDir, nodeName: checked.nodeName, dataRootOnNetwork: checked.dataRootOnNetwork }).toEqual(JSON.parse(text));
    return JSON.parse(text) as Record<string, unknown>;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

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
    // The node's name as Kubernetes knows it, which need not be the host name the executable would guess.
    expect(installerConfig(docs)).toEqual({ kubeletDir: DEFAULT_KUBELET_DIR, nodeName: NODE_NAME, dataRootOnNetwork: false });
    const namespaced = docs.filter((d) => !['Namespace', 'CSIDriver', 'ClusterRole', 'ClusterRoleBinding', 'StorageClass', 'VolumeSnapshotClass'].includes(String(d.kind)));
    expect(namespaced.map((d) => (d.metadata as JsonObject).namespace)).toEqual(namespaced.map(() => 'twinvol'));
    // Cluster-scoped ones carry none: kustomize's namespace: once gave the VolumeSnapshotClass one.
    const clusterScoped = docs.filter((d) => !namespaced.includes(d));
    expect(clusterScoped.map((d) => (d.metadata as JsonObject).namespace)).toEqual(clusterScoped.map(() => undefined));
  });

  it('a kubelet dir changed in settings.yaml changes it everywhere', () => {
    const scratch = scratchCopy();
    cleanup = scratch.remove;
    const settings = join(scratch.base, 'settings.yaml');
    writeFileSync(settings, readFileSync(settings, 'utf8').replace(`kubeletDir: ${DEFAULT_KUBELET_DIR}`, `kubeletDir: ${OTHER_KUBELET_DIR}`));
    const docs = render(scratch.base);
    expectSound(docs, OTHER_KUBELET_DIR);
    expect(strayKubeletDirs(docs, OTHER_KUBELET_DIR)).toEqual([]);
    expect(stringsIn(docs).filter((s) => s.startsWith(OTHER_KUBELET_DIR))).toHaveLength(6);
    expect(installerConfig(docs)).toEqual({ kubeletDir: OTHER_KUBELET_DIR, nodeName: NODE_NAME, dataRootOnNetwork: false });
  });

  it('dataRootOnNetwork set in settings.yaml reaches both plugins and the FlexVolume config', () => {
    const scratch = scratchCopy();
    cleanup = scratch.remove;
    const settings = join(scratch.base, 'settings.yaml');
    writeFileSync(settings, readFileSync(settings, 'utf8').replace('dataRootOnNetwork: "false"', 'dataRootOnNetwork: "true"'));
    const docs = render(scratch.base);
    expectSound(docs, DEFAULT_KUBELET_DIR);
    const plugins = workloads(docs).flatMap((w) => w.spec.containers.filter(isPlugin).map((c) => [w.name, pluginFlags(c).overrides.dataRootOnNetwork]));
    expect(plugins).toEqual([
      ['twinvol-controller', true],
      ['twinvol-node', true],
    ]);
    expect(installerConfig(docs)).toEqual({ kubeletDir: DEFAULT_KUBELET_DIR, nodeName: NODE_NAME, dataRootOnNetwork: true });
  });

  it('a kubelet dir changed by an overlay, as settings.yaml describes, changes it everywhere', () => {
    const scratch = scratchCopy();
    cleanup = scratch.remove;
    const docs = render(writeKubeletDirOverlay(scratch.dir, OTHER_KUBELET_DIR));
    expectSound(docs, OTHER_KUBELET_DIR);
    expect(strayKubeletDirs(docs, OTHER_KUBELET_DIR)).toEqual([]);
    expect(installerConfig(docs)).toEqual({ kubeletDir: OTHER_KUBELET_DIR, nodeName: NODE_NAME, dataRootOnNetwork: false });
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

  it('the exec backend example, as a component of an overlay, adds its class and PV and lets both plugins run the driver', () => {
    const scratch = scratchCopy();
    cleanup = scratch.remove;
    const docs = render(writeComponentOverlay(scratch.dir, 'examples/exec-backend'));
    expect(docs).toHaveLength(loadManifests().docs.length);
    expectSound(docs, DEFAULT_KUBELET_DIR);
    const plugins = docs.flatMap((d) => workloads([d])).flatMap((w) => w.spec.containers.filter(isPlugin).map((c) => ({ w, flags: pluginFlags(c) })));
    expect(plugins.map((p) => [p.w.name, p.flags.exec.execIn, p.w.spec.hostPID])).toEqual([
      ['twinvol-controller', 'host', true],
      ['twinvol-node', 'host', true],
    ]);
    // Without the host's pids, or without the driver directory on the controller, the checks say so.
    const broken = structuredClone(docs);
    delete at(broken.find((d) => d.kind === 'DaemonSet' && (d.metadata as JsonObject).name === 'twinvol-node') ?? {}, 'spec.template.spec').hostPID;
    const controller = at(broken.find((d) => d.kind === 'Deployment') ?? {}, 'spec.template.spec.containers.0');
    controller.volumeMounts = (controller.volumeMounts as JsonObject[]).filter((m) => m.name !== 'flex-plugin-dir');
    expect(consistencyProblems(renderedSet(broken))).toEqual([
      'Deployment/twinvol-controller: FlexVolume drivers run from /usr/libexec/kubernetes/kubelet-plugins/volume/exec, which must be the host\'s, at the same path',
      'DaemonSet/twinvol-node: --flex-exec=host enters pid 1 of the host: hostPID must be true',
    ]);
  });
});
