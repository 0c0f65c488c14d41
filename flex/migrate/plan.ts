import { quantityBytes } from '../../shared/index.js';
import { DNS_LABEL, type Inventory, nsKey, secretInInput } from './input.js';
import { type Mapping, mappingFor } from './mappings.js';
import { at, cleaned, fields, isObject, type JsonObject, type KubeObject, label, Refusal } from './objects.js';
import { type CsiTarget, csiPersistentSource, execTarget, type FlexSource, TargetRefusal, twinvolTarget, vendorTarget, isTwinvolDriver } from './targets.js';
import { type InlineVolume, type WorkloadUse, workloadUses } from './workloads.js';

export interface PlanOptions {
  /** --prefer vendor: the built-in mappings to vendors' CSI drivers apply. */
  preferVendor: boolean;
  /** --mapping files' entries (they apply whatever --prefer says). */
  mappings: readonly Mapping[];
  /** --no-exec: a driver with no mapping is not moved behind the exec backend. */
  exec: boolean;
}

/** One PV's move. */
export interface Move {
  pv: KubeObject;
  claim?: KubeObject;
  flexDriver: string;
  target: CsiTarget;
  /** The original reclaim policy, restored on the new PV as the last step. */
  reclaimPolicy: string;
  newPv: JsonObject;
  newClaim?: JsonObject;
  /** The workloads using the claim (stopped before, started after). */
  users: WorkloadUse[];
  /** The storage request both re-created claims (forward and rollback) make, when not the claim's own (fittedRequest). */
  claimRequest?: string;
}

export interface Plan {
  moves: Move[];
  /** One line per object that is not moved: "Kind ns/name: field: why". */
  skipped: string[];
  /** Inline flexVolume volumes of pods and pod templates, with what replaces them. */
  inline: InlineVolume[];
  /** What was worth saying about a planned move (an option dropped, a secret copied). */
  notes: string[];
}

/** Annotations on a new PV: where it came from, and the reclaim policy the last step restores. */
const FROM_ANNOTATION = 'migrate.twinvol.io/from-driver';
const POLICY_ANNOTATION = 'migrate.twinvol.io/reclaim-policy';

export function plan(inv: Inventory, options: PlanOptions): Plan {
  const uses = workloadUses(inv, (src) => inlineTarget(src, options));
  const result: Plan = { moves: [], skipped: [...uses.refusals], inline: uses.inline, notes: [] };
  const planned: Move[] = [];
  for (const pv of inv.pvs) {
    if (at(pv.doc, 'spec.flexVolume') === undefined) continue;
    try {
      planned.push(planPv(pv, inv, options, uses.users));
    } catch (err) {
      if (err instanceof Refusal) result.skipped.push(err.message);
      else if (err instanceof TargetRefusal) result.skipped.push(`${label(pv)}: ${err.message}`);
      else throw err;
    }
  }
  // twinvol-csi keeps one catalog: an exec volume's id (its PV name) that is also the id of one of
  // twinvol's own volumes would find that volume's record, and be refused as not an exec volume.
  const own = new Map(planned.filter((m) => m.target.route === 'twinvol').map((m) => [m.target.volumeHandle, m.pv]));
  const unclashed = planned.filter((move) => {
    const clash = move.target.route === 'exec' ? own.get(move.target.volumeHandle) : undefined;
    if (clash) result.skipped.push(`${label(move.pv)}: metadata.name: ${move.pv.name} would be the exec volume's id in twinvol's catalog, which ${label(clash)} names as twinvol volume ${move.target.volumeHandle}; use a mapping, or move one of them at a time`);
    return !clash;
  });
  const holders = handleHolders(inv, unclashed);
  for (const move of unclashed) {
    const others = (holders.get(handleKey(move.target.driver, move.target.volumeHandle)) ?? []).filter((o) => o !== move.pv);
    if (others.length) {
      result.skipped.push(
        `${label(move.pv)}: its ${move.target.driver} volumeHandle ${move.target.volumeHandle} would also be that of ${others.map(label).join(', ')}: kubelet takes PVs of one driver and volumeHandle for one volume (one staging, one attachment); use a mapping whose volumeHandle has {pv} in it`,
      );
      continue;
    }
    result.moves.push(move);
    result.notes.push(...move.target.notes.map((n) => `${label(move.pv)}: ${n}`));
  }
  // A pod that uses several of the claims is said once.
  result.notes.push(...new Set(result.moves.flatMap((m) => m.users.flatMap((u) => (u.note ? [u.note] : [])))));
  return result;
}

const handleKey = (driver: string, handle: string) => `${driver}^${handle}`;

/**
 * Who would hold each CSI driver and volumeHandle once the plan ran: the moves, and the CSI PVs already
 * in the input. kubelet names a CSI volume `<driver>^<volumeHandle>` (its unique volume name), so two
 * PVs with the same pair are one volume to it. Built-in mappings make handles from the share (a
 * k8s/nfs PV's `{server}#{share}#`), which two PVs of one share have in common.
 */
function handleHolders(inv: Inventory, moves: readonly Move[]): Map<string, KubeObject[]> {
  const holders = new Map<string, KubeObject[]>();
  const add = (key: string, pv: KubeObject) => holders.set(key, [...(holders.get(key) ?? []), pv]);
  for (const pv of inv.pvs) {
    const driver = at(pv.doc, 'spec.csi.driver');
    const handle = at(pv.doc, 'spec.csi.volumeHandle');
    if (typeof driver === 'string' && typeof handle === 'string') add(handleKey(driver, handle), pv);
  }
  for (const m of moves) add(handleKey(m.target.driver, m.target.volumeHandle), m.pv);
  return holders;
}

/** Which way a FlexVolume source goes: twinvol's own, a mapping, or the exec backend. */
function targetOf(src: FlexSource, options: PlanOptions): CsiTarget {
  if (isTwinvolDriver(src.driver)) return twinvolTarget(src);
  const mapping = mappingFor(src.driver, options.mappings, options.preferVendor);
  if (mapping) return vendorTarget(src, mapping);
  if (!options.exec) throw new TargetRefusal('spec.flexVolume.driver', `${src.driver} has no mapping to a CSI driver (built-in ones apply with --prefer vendor; add one with --mapping), and --no-exec keeps it from the exec backend`);
  return execTarget(src);
}

/**
 * An inline volume's replacement: a CSI inline volume carries no mount options and only a node
 * publish secret (core/v1 CSIVolumeSource), so a vendor mapping that needs either goes through the
 * exec backend instead, which passes the driver its options verbatim.
 */
function inlineTarget(src: FlexSource, options: PlanOptions): CsiTarget {
  const target = targetOf(src, options);
  if (target.route === 'twinvol') return target;
  if (target.route === 'exec') return allowedInline(target, src);
  if (target.mountOptions.length === 0 && !target.newSecret && target.secretRef?.placement !== 'nodeStage') return target;
  const exec = execTarget(src);
  exec.notes.push(`served by the exec backend: ${target.driver} would need ${target.mountOptions.length ? 'mount options' : 'a node stage secret'}, which an inline CSI volume cannot carry`);
  return allowedInline(exec, src);
}

/** twinvol's node plugin serves an exec inline volume only for a driver it names (csi/exec-service.ts). */
function allowedInline(target: CsiTarget, src: FlexSource): CsiTarget {
  target.notes.push(`the twinvol CSI node plugin serves it only when run with --flex-inline ${src.driver}: the pod's author writes an inline volume's options`);
  return target;
}

function planPv(pv: KubeObject, inv: Inventory, options: PlanOptions, users: ReadonlyMap<string, WorkloadUse[]>): Move {
  const f = fields(pv);
  const driver = f.requiredString('spec.flexVolume.driver');
  const claimRef = f.object('spec.claimRef');
  let claim: KubeObject | undefined;
  if (claimRef) {
    const name = f.requiredString('spec.claimRef.name');
    const namespace = f.requiredString('spec.claimRef.namespace');
    claim = inv.claims.get(nsKey(namespace, name));
    if (!claim) return f.refuse(`spec.claimRef names PersistentVolumeClaim ${namespace}/${name}, which is not in the input (kubectl get pvc -n ${namespace} ${name} -o yaml)`);
    const boundTo = fields(claim).string('spec.volumeName');
    if (boundTo && boundTo !== pv.name) f.refuse(`spec.claimRef names PersistentVolumeClaim ${namespace}/${name}, which is bound to PersistentVolume ${boundTo}`);
    // Unbound, the claim may yet bind elsewhere, and two PVs pre-bound to it were both planned with
    // a migrate.sh whose first check could never pass for both.
    if (!boundTo) f.refuse(`spec.claimRef names PersistentVolumeClaim ${namespace}/${name}, which is not bound (no spec.volumeName): move the PV once its claim is bound to it`);
  }
  const secretRef = f.object('spec.flexVolume.secretRef');
  let secret: FlexSource['secret'];
  if (secretRef) {
    const name = f.requiredString('spec.flexVolume.secretRef.name');
    // kubelet reads a PV's secret from secretRef.namespace, else from the pod's namespace, which is
    // the claim's (pkg/volume/flexvolume/util.go getSecretNameAndNamespace); a CSI PV names it.
    const namespace = f.string('spec.flexVolume.secretRef.namespace') || claim?.namespace;
    if (!namespace) return f.refuse('spec.flexVolume.secretRef.namespace is missing, and the PV has no claim whose namespace kubelet would have used');
    secret = { name, namespace };
  }
  const secretData = secret ? secretDataOf(inv, secret) : undefined;
  const src: FlexSource = {
    driver,
    options: f.stringMap('spec.flexVolume.options'),
    fsType: f.string('spec.flexVolume.fsType') ?? '',
    readOnly: f.boolean('spec.flexVolume.readOnly'),
    ...(secret ? { secret } : {}),
    ...(secretData ? { secretData } : {}),
    name: pv.name,
    secretInInput: (namespace, name) => secretInInput(inv, namespace, name),
  };
  const target = targetOf(src, options);
  // The API server checks a FlexVolume PV's secretRef not at all, and a CSI PV's secret references as
  // DNS-1123 labels, name and namespace (pkg/apis/core/validation/validation.go,
  // validatePVSecretReference): the apply of step 6 would fail with the old PV already deleted.
  const ref = target.secretRef;
  if (ref && !(DNS_LABEL.test(ref.name) && DNS_LABEL.test(ref.namespace)))
    f.refuse(
      `spec.flexVolume.secretRef: the CSI PV would name Secret ${ref.namespace}/${ref.name} in its ${ref.placement}SecretRef, which must name a Secret and a namespace that are DNS-1123 labels (lower-case letters, digits and "-", at most 63 characters), which the API server checks for CSI PVs and not for FlexVolume ones, so the new PV would be refused after the old one was deleted; copy the Secret to such a name and point the PV at it first`,
    );
  const volumeMode = f.string('spec.volumeMode');
  if (volumeMode === 'Block' && target.route !== 'twinvol')
    f.refuse(`spec.volumeMode Block: ${target.route === 'exec' ? "the exec backend serves filesystems only (csi/exec-service.ts), as FlexVolume drivers do" : `${target.driver} serves filesystems only`}`);
  const capacity = f.requiredString('spec.capacity.storage');
  const capacityBytes = quantityBytes(capacity);
  // kubectl apply would refuse it only after the old PV was deleted (a dry run's create is client-side).
  if (capacityBytes === undefined) f.refuse(`spec.capacity.storage ${JSON.stringify(capacity.slice(0, 40))} is not a Kubernetes quantity (such as 10Gi)`);
  const accessModes = f.stringList('spec.accessModes');
  if (!accessModes?.length) f.refuse('spec.accessModes is missing');
  const reclaimPolicy = f.string('spec.persistentVolumeReclaimPolicy') ?? 'Retain';
  const mountOptions = [...new Set([...(f.stringList('spec.mountOptions') ?? []), ...target.mountOptions])];
  if (f.stringList('spec.mountOptions')?.length && target.route !== 'twinvol')
    target.notes.push('spec.mountOptions kept: kubelet refused mount options for FlexVolume PVs (flexVolumePlugin.SupportsMountOption is false), the CSI driver now gets them');
  const storageClassName = f.string('spec.storageClassName');
  const nodeAffinity = f.object('spec.nodeAffinity');
  const labels = f.stringMap('metadata.labels');
  const newPv: JsonObject = {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: {
      name: pv.name,
      ...(Object.keys(labels).length ? { labels } : {}),
      annotations: { [FROM_ANNOTATION]: driver, [POLICY_ANNOTATION]: reclaimPolicy },
    },
    spec: {
      capacity: { storage: capacity },
      accessModes: accessModes ?? [],
      ...(volumeMode ? { volumeMode } : {}),
      // Retain until the workloads run again on the new PV (the last step restores the original):
      // a claim deleted on the way must never take the volume with it.
      persistentVolumeReclaimPolicy: 'Retain',
      ...(storageClassName !== undefined ? { storageClassName } : {}),
      ...(mountOptions.length ? { mountOptions } : {}),
      ...(nodeAffinity ? { nodeAffinity: structuredClone(nodeAffinity) } : {}),
      ...(claim ? { claimRef: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', namespace: claim.namespace, name: claim.name } } : {}),
      csi: csiPersistentSource(target),
    },
  };
  const claimUsers = claim ? (users.get(nsKey(claim.namespace, claim.name)) ?? []) : [];
  for (const u of claimUsers) if (u.refusal) f.refuse(u.refusal);
  const claimRequest = claim ? fittedRequest(claim, capacity, capacityBytes ?? 0n) : undefined;
  if (claim && claimRequest)
    target.notes.push(
      `PersistentVolumeClaim ${claim.namespace}/${claim.name} requests ${fields(claim).string('spec.resources.requests.storage')}, more than the ${capacity} of the PV (an expansion the FlexVolume driver never made): kube-controller-manager binds a claim to the PV it names only if the PV is at least as large as its request, so the re-created claim, and the rollback's, request ${capacity}, what the volume holds; ask for more again once the claim is Bound`,
    );
  return {
    pv,
    ...(claim ? { claim, newClaim: newClaimOf(claim, pv.name, storageClassName, claimRequest) } : {}),
    ...(claimRequest ? { claimRequest } : {}),
    flexDriver: driver,
    target,
    reclaimPolicy,
    newPv,
    users: claimUsers,
  };
}

function secretDataOf(inv: Inventory, secret: { name: string; namespace: string }): Record<string, string> | undefined {
  const object = inv.secrets.get(nsKey(secret.namespace, secret.name));
  if (!object) return undefined;
  return fields(object).stringMap('data');
}

/** Annotations the provisioner and scheduler put on a claim; the re-created claim is pre-bound instead. */
const CLAIM_ANNOTATIONS = ['volume.beta.kubernetes.io/storage-provisioner', 'volume.kubernetes.io/storage-provisioner', 'volume.beta.kubernetes.io/storage-class'];

/**
 * The claim to re-create: the same name, namespace, labels, access modes, request and volume mode,
 * pre-bound (`volumeName`) to the new PV, with the PV's storage class ("" when it has none, so that
 * no default class is filled in and the binding still matches).
 */
function newClaimOf(claim: KubeObject, pvName: string, storageClassName: string | undefined, request: string | undefined): JsonObject {
  const f = fields(claim);
  const meta = cleaned(claim.doc).metadata;
  const annotations = isObject(meta) && isObject(meta.annotations) ? { ...meta.annotations } : {};
  for (const key of CLAIM_ANNOTATIONS) delete annotations[key];
  const labels = f.stringMap('metadata.labels');
  const accessModes = f.stringList('spec.accessModes');
  const resources = f.object('spec.resources');
  if (!resources) f.refuse('spec.resources is missing');
  const volumeMode = f.string('spec.volumeMode');
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: claim.name,
      namespace: claim.namespace,
      ...(Object.keys(labels).length ? { labels } : {}),
      ...(Object.keys(annotations).length ? { annotations } : {}),
    },
    spec: {
      ...(accessModes ? { accessModes } : {}),
      resources: withRequest(structuredClone(resources ?? {}), request),
      ...(volumeMode ? { volumeMode } : {}),
      storageClassName: storageClassName ?? '',
      volumeName: pvName,
    },
  };
}

/**
 * The storage request a re-created claim must make to bind to its PV, when the claim's own is more
 * than the PV holds (an expansion asked on the claim that the FlexVolume driver never made):
 * kube-controller-manager binds a claim to the PV its volumeName names only when the PV's capacity is
 * at least the request, both rounded up to whole bytes (pkg/controller/volume/persistentvolume/
 * pv_controller.go, checkVolumeSatisfyClaim), else the claim stays Pending ("requested PV is too
 * small") with its workloads stopped. The PV keeps the size its volume has; the request comes down
 * to it. Undefined when the claim's own request fits.
 */
function fittedRequest(claim: KubeObject, capacity: string, capacityBytes: bigint): string | undefined {
  const f = fields(claim);
  const request = f.string('spec.resources.requests.storage');
  if (request === undefined) return undefined;
  const bytes = quantityBytes(request);
  if (bytes === undefined) return f.refuse(`spec.resources.requests.storage ${JSON.stringify(request.slice(0, 40))} is not a Kubernetes quantity (such as 10Gi)`);
  return bytes > capacityBytes ? capacity : undefined;
}

/** A claim's spec.resources with its storage request set to `request` (kept when undefined). */
export function withRequest(resources: JsonObject, request: string | undefined): JsonObject {
  if (request === undefined) return resources;
  const requests = isObject(resources.requests) ? resources.requests : {};
  return { ...resources, requests: { ...requests, storage: request } };
}
