import type { IClusterRole, IClusterRoleBinding, IPolicyRule, IRole, IRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { isObject, type JsonObject } from './load.js';
import { imageName, workloads } from './pods.js';

/** `apiGroup resource verb verb...`; the core group is "". */
type Need = readonly [group: string, resource: string, verbs: string];

/**
 * What each sidecar needs, from its upstream deploy file at the release deploy/controller.yaml runs:
 * external-provisioner v6.3.0, external-attacher v4.12.0 and external-resizer v2.2.1
 * deploy/kubernetes/rbac.yaml, external-snapshotter v8.6.0
 * deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml. Rules upstream marks optional for
 * features twinvol does not use (secrets, capacity tracking, reference grants) are left out; the group
 * snapshot rules are granted, for when the snapshotter's CSIVolumeGroupSnapshot gate is turned on
 * (deploy/controller-rbac.yaml says what else that needs), and not required here.
 */
const CLUSTER_NEEDS: Readonly<Record<string, readonly Need[]>> = {
  'csi-provisioner': [
    ['', 'persistentvolumes', 'get list watch create patch delete'],
    ['', 'persistentvolumeclaims', 'get list watch update'],
    ['storage.k8s.io', 'storageclasses', 'get list watch'],
    ['', 'events', 'list watch create update patch'],
    ['snapshot.storage.k8s.io', 'volumesnapshots', 'get list watch update'],
    ['snapshot.storage.k8s.io', 'volumesnapshotcontents', 'get list'],
    ['storage.k8s.io', 'csinodes', 'get list watch'],
    ['', 'nodes', 'get list watch'],
    ['storage.k8s.io', 'volumeattachments', 'get list watch'],
  ],
  'csi-attacher': [
    ['', 'persistentvolumes', 'get list watch patch'],
    ['storage.k8s.io', 'csinodes', 'get list watch'],
    ['storage.k8s.io', 'volumeattachments', 'get list watch patch'],
    ['storage.k8s.io', 'volumeattachments/status', 'patch'],
  ],
  'csi-resizer': [
    ['', 'persistentvolumes', 'get list watch patch'],
    ['', 'persistentvolumeclaims', 'get list watch'],
    ['', 'pods', 'get list watch'],
    ['', 'persistentvolumeclaims/status', 'patch'],
    ['', 'events', 'list watch create update patch'],
    ['storage.k8s.io', 'volumeattributesclasses', 'get list watch'],
  ],
  'csi-snapshotter': [
    ['', 'events', 'list watch create update patch'],
    ['snapshot.storage.k8s.io', 'volumesnapshotclasses', 'get list watch'],
    ['snapshot.storage.k8s.io', 'volumesnapshotcontents', 'get list watch update patch'],
    ['snapshot.storage.k8s.io', 'volumesnapshotcontents/status', 'update patch'],
  ],
};
/** Leader election (--leader-election) takes a lease in the pod's own namespace. */
const LEASES: Need = ['coordination.k8s.io', 'leases', 'get watch list delete update create'];

const grants = (rules: readonly IPolicyRule[] | undefined, [group, resource, verb]: readonly [string, string, string]) =>
  (rules ?? []).some(
    (r) =>
      (r.apiGroups ?? []).some((g) => g === group || g === '*') &&
      (r.resources ?? []).some((x) => x === resource || x === '*') &&
      r.verbs.some((v) => v === verb || v === '*'),
  );

const typed = <T>(docs: readonly JsonObject[], kind: string) => docs.filter((d) => d.kind === kind) as unknown as T[];
const nameOfMeta = (d: { metadata?: { name?: string; namespace?: string } }) => d.metadata?.name ?? '';

/**
 * Every workload's ServiceAccount exists in its namespace; every binding names an existing account
 * and role; and each controller sidecar's account is granted what that sidecar needs.
 */
export function rbacProblems(docs: readonly JsonObject[]): string[] {
  const problems: string[] = [];
  const accounts = docs.filter((d) => d.kind === 'ServiceAccount' && isObject(d.metadata)).map((d) => `${String((d.metadata as JsonObject).namespace)}/${String((d.metadata as JsonObject).name)}`);
  const clusterRoles = typed<IClusterRole>(docs, 'ClusterRole');
  const roles = typed<IRole>(docs, 'Role');
  const clusterBindings = typed<IClusterRoleBinding>(docs, 'ClusterRoleBinding');
  const bindings = typed<IRoleBinding>(docs, 'RoleBinding');
  for (const b of [...clusterBindings, ...bindings]) {
    const where = `${b.kind}/${nameOfMeta(b)}`;
    for (const s of b.subjects ?? [])
      if (s.kind === 'ServiceAccount' && !accounts.includes(`${s.namespace ?? b.metadata?.namespace}/${s.name}`)) problems.push(`${where}: binds ServiceAccount ${s.namespace}/${s.name}, which deploy/ does not create`);
    const pool: { metadata?: { name?: string; namespace?: string } }[] = b.roleRef.kind === 'ClusterRole' ? clusterRoles : roles.filter((r) => r.metadata?.namespace === b.metadata?.namespace);
    if (!pool.some((r) => nameOfMeta(r) === b.roleRef.name)) problems.push(`${where}: refers to ${b.roleRef.kind} ${b.roleRef.name}, which deploy/ does not create`);
  }
  /** The rules an account holds cluster-wide, and in its own namespace. */
  const rulesOf = (ns: string, sa: string) => {
    const bound = (subjects: IRoleBinding['subjects'], bns?: string) => (subjects ?? []).some((s) => s.kind === 'ServiceAccount' && s.name === sa && (s.namespace ?? bns) === ns);
    const cluster = clusterBindings.filter((b) => bound(b.subjects)).flatMap((b) => clusterRoles.filter((r) => nameOfMeta(r) === b.roleRef.name).flatMap((r) => r.rules ?? []));
    const local = bindings
      .filter((b) => b.metadata?.namespace === ns && bound(b.subjects, ns))
      .flatMap((b) => (b.roleRef.kind === 'ClusterRole' ? clusterRoles : roles.filter((r) => r.metadata?.namespace === ns)).filter((r) => nameOfMeta(r) === b.roleRef.name).flatMap((r) => r.rules ?? []));
    return { cluster, local: [...cluster, ...local] };
  };
  for (const w of workloads(docs)) {
    const sa = w.spec.serviceAccountName ?? 'default';
    if (!accounts.includes(`${w.namespace}/${sa}`)) problems.push(`${w.kind}/${w.name}: runs as ServiceAccount ${sa}, which deploy/ does not create in ${w.namespace}`);
    const { cluster, local } = rulesOf(w.namespace, sa);
    for (const c of w.spec.containers) {
      const needs = CLUSTER_NEEDS[imageName(c) ?? ''];
      if (!needs) continue;
      for (const [group, resource, verbs] of needs)
        for (const verb of verbs.split(' '))
          if (!grants(cluster, [group, resource, verb])) problems.push(`${w.kind}/${w.name}: ${c.name} may not ${verb} ${resource}${group ? `.${group}` : ''} (ServiceAccount ${sa})`);
      for (const verb of LEASES[2].split(' '))
        if (!grants(local, [LEASES[0], LEASES[1], verb])) problems.push(`${w.kind}/${w.name}: ${c.name} may not ${verb} leases in ${w.namespace} for leader election`);
    }
  }
  return problems;
}
