// deploy/ (issue 11, item 3), offline: every document parsed and validated against the Kubernetes
// schemas (kubernetes-models, strictly: test/deploy/schema.ts), then checked for what must agree across
// files (test/deploy/checks.ts). A broken copy of each thing checked must be caught, so none of the
// checks passes by not looking. kubectl (its built-in kustomize, no cluster) renders deploy/ as
// `kubectl apply -k` would, with the default kubelet dir and with another one.
import { describe, expect, it } from 'vitest';
import { CHECKS, consistencyProblems } from './checks.js';
import { loadManifests, type ManifestSet } from './load.js';
import { at, containerOf, docOf, listAt, setArg } from './mutate.js';
import { schemaProblems } from './schema.js';

const set = loadManifests();
const allProblems = (s: ManifestSet) => [...s.docs.flatMap((m) => schemaProblems(m.doc)), ...consistencyProblems(s)];

describe('deploy/: every document against the Kubernetes schemas', () => {
  it('parses every file, and finds the objects the driver needs', () => {
    const kinds = set.docs.map((m) => m.doc.kind).sort();
    expect(new Set(kinds)).toEqual(
      new Set(['Namespace', 'ConfigMap', 'CSIDriver', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'Deployment', 'DaemonSet', 'StorageClass', 'VolumeSnapshotClass', 'PersistentVolume']),
    );
    expect(kinds.filter((k) => k === 'DaemonSet')).toHaveLength(2);
    expect(set.kustomizations.map((k) => k.dir).sort()).toEqual(['', 'examples/exec-backend']);
  });

  it.each(set.docs.map((m) => [`${m.file}#${m.index} ${String(m.doc.kind)}`, m.doc] as const))('%s is valid', (_name, doc) => {
    expect(schemaProblems(doc)).toEqual([]);
  });
});

describe('deploy/: what must agree across files', () => {
  it.each(Object.entries(CHECKS))('%s', (_name, check) => {
    expect(check(set)).toEqual([]);
  });
});

interface Breakage {
  what: string;
  edit: (s: ManifestSet) => void;
  caught: RegExp;
}

const plugin = (s: ManifestSet) => containerOf(s, 'DaemonSet', 'twinvol-node', 'twinvol');
const BREAKAGES: Breakage[] = [
  { what: 'a misspelt field', edit: (s) => (at(plugin(s), 'securityContext').privilegd = true), caught: /unknown field spec\.template\.spec\.containers\.0\.securityContext\.privilegd/ },
  { what: 'a value outside its enum', edit: (s) => (at(plugin(s), 'volumeMounts.0').mountPropagation = 'Sideways'), caught: /mountPropagation must be equal to one of the allowed values/ },
  { what: 'a VolumeSnapshotClass deletion policy', edit: (s) => (docOf(s, 'VolumeSnapshotClass', 'twinvol').deletionPolicy = 'Keep'), caught: /deletionPolicy must be Delete or Retain/ },
  { what: 'a file left out of the kustomization', edit: (s) => {
      const resources = s.kustomizations.find((k) => k.dir === '')?.resources ?? [];
      resources.splice(resources.indexOf('node.yaml'), 1);
    }, caught: /^node\.yaml: not listed/ },
  { what: 'the CSIDriver name', edit: (s) => (at(docOf(s, 'CSIDriver', 'csi.twinvol.io'), 'metadata').name = 'twinvol.io'), caught: /CSIDriver\/twinvol\.io: the driver is csi\.twinvol\.io/ },
  { what: 'a StorageClass provisioner', edit: (s) => (docOf(s, 'StorageClass', 'twinvol-dir').provisioner = 'twinvol'), caught: /StorageClass\/twinvol-dir names driver twinvol/ },
  { what: 'the driver name a plugin serves', edit: (s) => setArg(plugin(s), '--driver-name=', '--driver-name=csi.example.com'), caught: /serves another driver name/ },
  { what: 'a flag the plugin does not have', edit: (s) => listAt(plugin(s), 'args').push('--log-levle=debug'), caught: /twinvol-csi refuses its args/ },
  { what: "the registrar's socket", edit: (s) => setArg(containerOf(s, 'DaemonSet', 'twinvol-node', 'node-driver-registrar'), '--csi-address=', '--csi-address=/csi/other.sock'), caught: /node-driver-registrar dials \/csi\/other\.sock/ },
  { what: "the controller livenessprobe's socket", edit: (s) => setArg(containerOf(s, 'Deployment', 'twinvol-controller', 'liveness-probe'), '--csi-address=', '--csi-address=/tmp/csi.sock'), caught: /liveness-probe dials \/tmp\/csi\.sock \(not a shared volume\)/ },
  { what: 'the registration path', edit: (s) => setArg(containerOf(s, 'DaemonSet', 'twinvol-node', 'node-driver-registrar'), '--kubelet-registration-path=', '--kubelet-registration-path=/var/lib/kubelet/plugins/twinvol/csi.sock'), caught: /--kubelet-registration-path \/var\/lib\/kubelet\/plugins\/twinvol\/csi\.sock is not/ },
  { what: 'the kubelet dir in one place only', edit: (s) => (at(docOf(s, 'DaemonSet', 'twinvol-node'), 'spec.template.spec.volumes.0.hostPath').path = '/var/lib/k0s/kubelet'), caught: /the kubelet dir \/var\/lib\/kubelet must be mounted from the host/ },
  { what: 'the kubelet dir written twice', edit: (s) => listAt(docOf(s, 'DaemonSet', 'twinvol-node'), 'spec.template.spec.volumes').push({ name: 'registry', hostPath: { path: '/var/lib/kubelet/plugins_registry' } }), caught: /volume registry repeats the kubelet dir/ },
  { what: 'the kubelet dir without Bidirectional', edit: (s) => delete at(plugin(s), 'volumeMounts.0').mountPropagation, caught: /the kubelet dir must be mounted with Bidirectional propagation/ },
  { what: 'the node id not from the downward API', edit: (s) => setArg(plugin(s), '--node-id=', '--node-id=node-1'), caught: /--node-id must come from spec\.nodeName/ },
  { what: 'an unprivileged node plugin', edit: (s) => (at(plugin(s), 'securityContext').privileged = false), caught: /must be privileged/ },
  { what: "the controller's data root", edit: (s) => setArg(containerOf(s, 'Deployment', 'twinvol-controller', 'twinvol'), '--data-root=', '--data-root=/srv/twinvol'), caught: /its data root \(not a hostPath\) is not the node plugin's/ },
  { what: "the controller's dataRootOnNetwork", edit: (s) => setArg(containerOf(s, 'Deployment', 'twinvol-controller', 'twinvol'), '--data-root-on-network=', '--data-root-on-network=true'), caught: /--data-root-on-network is not the node plugin's/ },
  { what: 'a sidecar tag', edit: (s) => (containerOf(s, 'Deployment', 'twinvol-controller', 'csi-provisioner').image = 'registry.k8s.io/sig-storage/csi-provisioner:v6.2.0'), caught: /csi-provisioner: image .*:v6\.2\.0, expected .*:v6\.3\.0/ },
  { what: "the plugin's tag", edit: (s) => (plugin(s).image = 'ghcr.io/twinvol/twinvol:0.0.9'), caught: /expected ghcr\.io\/twinvol\/twinvol:0\.1\.0 \(package\.json version\)/ },
  { what: 'leader election', edit: (s) => setArg(containerOf(s, 'Deployment', 'twinvol-controller', 'csi-resizer'), '--leader-election', undefined), caught: /csi-resizer runs without --leader-election/ },
  { what: 'a binding to a missing ServiceAccount', edit: (s) => (at(docOf(s, 'RoleBinding', 'twinvol-leader-election'), 'subjects.0').name = 'twinvol-controler'), caught: /binds ServiceAccount twinvol\/twinvol-controler/ },
  { what: "a workload's ServiceAccount", edit: (s) => (at(docOf(s, 'Deployment', 'twinvol-controller'), 'spec.template.spec').serviceAccountName = 'controller'), caught: /runs as ServiceAccount controller/ },
  { what: 'a rule a sidecar needs', edit: (s) => listAt(docOf(s, 'ClusterRole', 'twinvol-external-attacher'), 'rules').pop(), caught: /csi-attacher may not patch volumeattachments\/status\.storage\.k8s\.io/ },
  { what: 'a StorageClass parameter CreateVolume refuses', edit: (s) => (at(docOf(s, 'StorageClass', 'twinvol-block'), 'parameters').fstype = 'xfs'), caught: /CreateVolume would refuse its parameters: .*unknown key "fstype"/ },
  { what: 'an exec class without a <vendor>/<name> driver', edit: (s) => (at(docOf(s, 'StorageClass', 'twinvol-exec-acme-nfs'), 'parameters').driver = 'acme'), caught: /twinvol-exec-acme-nfs: the exec backend would refuse its parameters: parameter driver "acme" must be <vendor>\/<name>/ },
  { what: 'expansion', edit: (s) => (docOf(s, 'StorageClass', 'twinvol-dir').allowVolumeExpansion = false), caught: /twinvol-dir: allowVolumeExpansion must be true/ },
  { what: 'a CSIDriver lifecycle mode', edit: (s) => (at(docOf(s, 'CSIDriver', 'csi.twinvol.io'), 'spec').volumeLifecycleModes = ['Persistent']), caught: /volumeLifecycleModes must be Persistent and Ephemeral/ },
  { what: 'the FlexVolume install command', edit: (s) => listAt(containerOf(s, 'DaemonSet', 'twinvol-flex-installer', 'install'), 'command').splice(2, 1, 'twinvol install flex'), caught: /one container must run `twinvol install flex --plugin-dir \/flexmnt --vendor twinvol`, not 0/ },
  { what: 'a namespace', edit: (s) => (at(docOf(s, 'ConfigMap', 'twinvol-settings'), 'metadata').namespace = 'default'), caught: /ConfigMap\/twinvol-settings: not in namespace twinvol/ },
];

describe('the checks fail on a broken copy', () => {
  it.each(BREAKAGES.map((b) => [b.what, b] as const))('%s', (_what, b) => {
    const copy = structuredClone(set);
    b.edit(copy);
    const problems = allProblems(copy);
    expect(problems).toContainEqual(expect.stringMatching(b.caught));
    // The untouched original stays clean: the problem is the edit's.
    expect(allProblems(set)).toEqual([]);
  });
});
