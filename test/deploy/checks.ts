import { readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { parseFlags } from '../../csi/flags.js';
import { CREATE_KEYS, pluginKeys, withoutCoKeys } from '../../csi/parameters.js';
import { execVolumeOf, validateBackend } from '../../shared/index.js';
import { isObject, type Json, type JsonObject, type ManifestSet, nameOf, REPO } from './load.js';
import { imageName, isPlugin, pluginFlags, workloads } from './pods.js';
import { podProblems } from './pod-checks.js';
import { rbacProblems } from './rbac-checks.js';

const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };

/** What the manifests must agree with, taken from the sources that decide it. */
export const EXPECTED = {
  /** The plugin's default --driver-name (csi/flags.ts), the name GetPluginInfo reports. */
  driverName: parseFlags(['--endpoint', '/csi.sock', '--mode', 'controller'], {}).driverName,
  pluginImage: `ghcr.io/twinvol/twinvol:${pkg.version}`,
  sidecarRegistry: 'registry.k8s.io/sig-storage',
  /** The sidecar releases issue 11 names. */
  sidecars: {
    'csi-provisioner': 'v6.3.0',
    'csi-attacher': 'v4.12.0',
    'csi-resizer': 'v2.2.1',
    'csi-snapshotter': 'v8.6.0',
    'csi-node-driver-registrar': 'v2.17.0',
    livenessprobe: 'v2.19.0',
  } as Readonly<Record<string, string>>,
};

type Check = (set: ManifestSet) => string[];

const base = (set: ManifestSet): JsonObject[] => set.docs.filter((m) => !m.file.startsWith('examples/')).map((m) => m.doc);
const all = (set: ManifestSet): JsonObject[] => set.docs.map((m) => m.doc);
const ofKind = (docs: readonly JsonObject[], kind: string) => docs.filter((d) => d.kind === kind);
const strings = (value: Json | undefined): Record<string, string> =>
  isObject(value) ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, String(v)])) : {};

/** Every YAML file is a resource of the kustomization in its directory, and every resource exists. */
export const kustomizationProblems: Check = (set) => {
  const problems: string[] = [];
  for (const file of set.files) {
    if (/(^|\/)kustomization\.ya?ml$/.test(file)) continue;
    const dir = posix.dirname(file) === '.' ? '' : posix.dirname(file);
    const k = set.kustomizations.find((x) => x.dir === dir);
    if (!k) problems.push(`${file}: no kustomization.yaml in ${dir || 'deploy/'}`);
    else if (!k.resources.includes(posix.basename(file))) problems.push(`${file}: not listed in the resources of ${dir ? `${dir}/` : ''}kustomization.yaml`);
  }
  for (const k of set.kustomizations)
    for (const r of k.resources)
      if (!set.files.includes(posix.join(k.dir, r)) && !set.kustomizations.some((x) => x.dir === posix.join(k.dir, r)))
        problems.push(`${k.dir ? `${k.dir}/` : ''}kustomization.yaml lists ${r}, which does not exist`);
  return problems;
};

/** The driver name: the CSIDriver's, every class's and PV's, and the one each plugin is started with. */
export const driverNameProblems: Check = (set) => {
  const want = EXPECTED.driverName;
  const problems: string[] = [];
  const drivers = ofKind(base(set), 'CSIDriver');
  if (drivers.length !== 1) problems.push(`deploy/ must hold one CSIDriver, not ${drivers.length}`);
  for (const d of drivers) if (isObject(d.metadata) && d.metadata.name !== want) problems.push(`${nameOf(d)}: the driver is ${want}`);
  for (const doc of all(set)) {
    const named =
      doc.kind === 'StorageClass' ? doc.provisioner
      : doc.kind === 'VolumeSnapshotClass' ? doc.driver
      : doc.kind === 'PersistentVolume' && isObject(doc.spec) && isObject(doc.spec.csi) ? doc.spec.csi.driver
      : want;
    if (named !== want) problems.push(`${nameOf(doc)} names driver ${String(named)}, not ${want}`);
  }
  for (const w of workloads(base(set)))
    for (const c of w.spec.containers)
      // Args the plugin refuses are reported by podProblems (test/deploy/pod-checks.ts).
      if (isPlugin(c) && refused(() => pluginFlags(c)) === undefined && pluginFlags(c).driverName !== want) problems.push(`${w.kind}/${w.name}: ${c.name} serves another driver name than ${want}`);
  return problems;
};

/** Sidecars at the releases above from registry.k8s.io, the plugin at package.json's version, nothing else. */
export const imageProblems: Check = (set) => {
  const problems: string[] = [];
  const seen = new Set<string>();
  const [pluginRepo] = EXPECTED.pluginImage.split(':');
  for (const w of workloads(base(set)))
    for (const c of [...(w.spec.initContainers ?? []), ...w.spec.containers]) {
      const image = c.image ?? '';
      const name = imageName(c) ?? '';
      const where = `${w.kind}/${w.name} container ${c.name}`;
      if (image.startsWith(`${pluginRepo}:`)) {
        if (image !== EXPECTED.pluginImage) problems.push(`${where}: image ${image}, expected ${EXPECTED.pluginImage} (package.json version)`);
        seen.add('twinvol');
      } else if (EXPECTED.sidecars[name]) {
        const want = `${EXPECTED.sidecarRegistry}/${name}:${EXPECTED.sidecars[name]}`;
        if (image !== want) problems.push(`${where}: image ${image}, expected ${want}`);
        seen.add(name);
      } else problems.push(`${where}: image ${image} is neither twinvol's nor a known sidecar`);
    }
  for (const name of ['twinvol', ...Object.keys(EXPECTED.sidecars)]) if (!seen.has(name)) problems.push(`no container runs ${name}`);
  return problems;
};

/** The CSIDriver object as csi/README.md describes the driver. */
export const csiDriverProblems: Check = (set) => {
  const problems: string[] = [];
  for (const d of ofKind(base(set), 'CSIDriver')) {
    const spec = isObject(d.spec) ? d.spec : {};
    const want: JsonObject = { attachRequired: true, podInfoOnMount: true, fsGroupPolicy: 'File' };
    for (const [key, value] of Object.entries(want)) if (spec[key] !== value) problems.push(`${nameOf(d)}: spec.${key} must be ${String(value)}`);
    const modes = Array.isArray(spec.volumeLifecycleModes) ? spec.volumeLifecycleModes.map(String).sort() : [];
    if (modes.join() !== 'Ephemeral,Persistent') problems.push(`${nameOf(d)}: spec.volumeLifecycleModes must be Persistent and Ephemeral`);
  }
  return problems;
};

function refused(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * StorageClass parameters are what CreateVolume accepts (csi/parameters.ts, run for real), and an exec
 * class's and an exec PV's name their FlexVolume driver as the exec backend reads it
 * (shared/backends/exec.ts, run for real). Expansion is allowed on twinvol's own classes, and deploy/
 * has a block class and a dir class. The VolumeSnapshotClass has what CreateSnapshot accepts (no
 * parameters: csi/controller.ts).
 */
export const classProblems: Check = (set) => {
  const problems: string[] = [];
  const backends = new Set<string>();
  for (const sc of ofKind(all(set), 'StorageClass')) {
    const params = strings(sc.parameters);
    if (params.backend === 'exec') {
      const why = refused(() => execVolumeOf('example', withoutCoKeys(params)));
      if (why) problems.push(`${nameOf(sc)}: the exec backend would refuse its parameters: ${why}`);
      continue;
    }
    const why = refused(() => {
      pluginKeys(params, 'parameters', CREATE_KEYS);
      backends.add(validateBackend(params.backend ?? 'block'));
    });
    if (why) problems.push(`${nameOf(sc)}: CreateVolume would refuse its parameters: ${why}`);
    if (sc.allowVolumeExpansion !== true) problems.push(`${nameOf(sc)}: allowVolumeExpansion must be true`);
  }
  for (const pv of ofKind(all(set), 'PersistentVolume')) {
    const attrs = strings(isObject(pv.spec) && isObject(pv.spec.csi) ? pv.spec.csi.volumeAttributes : undefined);
    const why = attrs.backend === 'exec' ? refused(() => execVolumeOf('example', attrs)) : undefined;
    if (why) problems.push(`${nameOf(pv)}: the exec backend would refuse its volume attributes: ${why}`);
  }
  for (const b of ['block', 'dir']) if (!backends.has(b)) problems.push(`no StorageClass for ${b} volumes`);
  const snapshotClasses = ofKind(base(set), 'VolumeSnapshotClass');
  if (snapshotClasses.length !== 1) problems.push(`deploy/ must hold one VolumeSnapshotClass, not ${snapshotClasses.length}`);
  for (const vsc of snapshotClasses) {
    const why = refused(() => pluginKeys(strings(vsc.parameters), 'parameters', []));
    if (why) problems.push(`${nameOf(vsc)}: CreateSnapshot would refuse its parameters: ${why}`);
  }
  return problems;
};

/** Namespaced objects of deploy/ are in the Namespace it creates. */
export const namespaceProblems: Check = (set) => {
  const docs = base(set);
  const ns = ofKind(docs, 'Namespace').map((d) => (isObject(d.metadata) ? String(d.metadata.name) : ''));
  if (ns.length !== 1) return [`deploy/ must create one Namespace, not ${ns.length}`];
  const namespaced = ['ServiceAccount', 'ConfigMap', 'Deployment', 'DaemonSet', 'Role', 'RoleBinding'];
  return docs
    .filter((d) => namespaced.includes(String(d.kind)) && (!isObject(d.metadata) || d.metadata.namespace !== ns[0]))
    .map((d) => `${nameOf(d)}: not in namespace ${ns[0]}`);
};

export const CHECKS: Readonly<Record<string, Check>> = {
  kustomization: kustomizationProblems,
  driverName: driverNameProblems,
  images: imageProblems,
  csiDriver: csiDriverProblems,
  classes: classProblems,
  namespaces: namespaceProblems,
  pods: (set) => podProblems(base(set), EXPECTED.driverName),
  rbac: (set) => rbacProblems(base(set)),
};

/** Every consistency problem of a deploy/ tree; [] when it is consistent. */
export function consistencyProblems(set: ManifestSet): string[] {
  return Object.values(CHECKS).flatMap((check) => check(set));
}
