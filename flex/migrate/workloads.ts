import { type Inventory, nsKey, POD_SPEC_PATHS, secretInInput } from './input.js';
import { at, fields, isObject, type Json, type JsonObject, type KubeObject, label, Refusal } from './objects.js';
import { type CsiTarget, type FlexSource, TargetRefusal } from './targets.js';

/** How a workload that uses a moved claim is stopped before the move and started after it. */
export type StopAction =
  /** Deployment, StatefulSet, ReplicaSet, ReplicationController: scale to 0, then back to `replicas`. */
  | { kind: 'scale'; replicas: number }
  /** DaemonSet: a nodeSelector no node has, then removed. */
  | { kind: 'daemonset' }
  /** CronJob: suspended, then back to `suspend`. */
  | { kind: 'suspend'; suspend: boolean }
  /** A pod nothing controls: deleted, then re-created from the rollback set. */
  | { kind: 'pod' }
  /**
   * A pod that has finished (Succeeded or Failed) but still names the claim: deleted, never started
   * again. The PVC-protection controller keeps a claim while any pod scheduled to a node names it,
   * finished or not (kube-controller-manager, pkg/controller/volume/pvcprotection/
   * pvc_protection_controller.go, podUsesPVC: kubelet may still be unmounting a finished pod's
   * volumes), and a finished pod stays until someone deletes it (the pod garbage collector waits
   * for thousands; a Job's ttlSecondsAfterFinished is optional): left, it held the claim's deletion.
   */
  | { kind: 'finished'; phase: string };

export interface WorkloadUse {
  object: KubeObject;
  action: StopAction;
  /** Why the claim cannot move while this workload uses it (a Job, a pod whose controller is not in the input). */
  refusal?: string;
  /** What the operator should know of how it is stopped and started (a pod that runs its command again). */
  note?: string;
}

/** An inline flexVolume of a pod or pod template, and the CSI inline volume that replaces it. */
export interface InlineVolume {
  object: KubeObject;
  /** spec.volumes[].name */
  volume: string;
  driver: string;
  /** The pod spec volume to put in its place. */
  replacement?: JsonObject;
  notes: string[];
}

export interface Uses {
  /** Claim ("namespace/name") -> the workloads to stop while it moves. */
  users: Map<string, WorkloadUse[]>;
  inline: InlineVolume[];
  /** Inline volumes that cannot be replaced, one line each. */
  refusals: string[];
}

const objectKey = (o: KubeObject) => `${o.kind}/${o.namespace}/${o.name}`;

/** The controlling owner's kind and name, from metadata.ownerReferences. */
function controllerOf(o: KubeObject): { kind: string; name: string } | undefined {
  const refs = at(o.doc, 'metadata.ownerReferences');
  if (!Array.isArray(refs)) return undefined;
  for (const ref of refs) if (isObject(ref) && ref.controller === true && typeof ref.kind === 'string' && typeof ref.name === 'string') return { kind: ref.kind, name: ref.name };
  return undefined;
}

/** A pod's phase when it has finished: its containers ran to the end and none is started again. */
function finishedPhase(o: KubeObject): string | undefined {
  const phase = o.kind === 'Pod' ? at(o.doc, 'status.phase') : undefined;
  return phase === 'Succeeded' || phase === 'Failed' ? phase : undefined;
}

/** A Job that is over (its Complete or Failed condition True): it starts no pod again. */
function jobOver(o: KubeObject): boolean {
  const conditions = o.kind === 'Job' ? at(o.doc, 'status.conditions') : undefined;
  return Array.isArray(conditions) && conditions.some((c) => isObject(c) && (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
}

/**
 * A bare pod whose containers are not restarted runs its command from the start again when the move
 * re-creates it: the operator should know before, not find out.
 */
function rerunNote(o: KubeObject): string | undefined {
  const policy = at(o.doc, 'spec.restartPolicy');
  if (policy !== 'Never' && policy !== 'OnFailure') return undefined;
  return `${label(o)} (restartPolicy ${policy}) is deleted, and re-created once the claims are moved: it runs its command again from the start; the scripts wait until it is Ready or has Succeeded, and stop if it fails`;
}

function actionOf(o: KubeObject): StopAction {
  const f = fields(o);
  if (o.kind === 'DaemonSet') return { kind: 'daemonset' };
  if (o.kind === 'CronJob') return { kind: 'suspend', suspend: f.boolean('spec.suspend') };
  if (o.kind === 'Pod') return { kind: 'pod' };
  // The start step scales back to it: a string once read as 1, and 2.5 or -1 made a `kubectl scale`
  // that failed after the claims had moved, with the workloads stopped.
  const replicas = at(o.doc, 'spec.replicas');
  if (replicas !== undefined && replicas !== null && !(typeof replicas === 'number' && Number.isSafeInteger(replicas) && replicas >= 0)) f.refuse('spec.replicas must be a whole number of 0 or more');
  return { kind: 'scale', replicas: typeof replicas === 'number' ? replicas : 1 };
}

/**
 * Who runs each pod or template: the object itself, or the controller above it when the input holds
 * it. `kubectl get pods,deploy` has no ReplicaSets, so a pod of ReplicaSet "<deployment>-<hash>" is
 * the Deployment's when the input holds that Deployment.
 */
function topOf(o: KubeObject, byKey: ReadonlyMap<string, KubeObject>): { top: KubeObject } | { missing: string } {
  const owner = controllerOf(o);
  if (!owner) return { top: o };
  const found = byKey.get(`${owner.kind}/${o.namespace}/${owner.name}`);
  if (found) return topOf(found, byKey);
  if (owner.kind === 'ReplicaSet') {
    const deployment = byKey.get(`Deployment/${o.namespace}/${owner.name.replace(/-[a-z0-9]+$/, '')}`);
    if (deployment) return topOf(deployment, byKey);
  }
  return { missing: `${owner.kind} ${o.namespace}/${owner.name}` };
}

/** The claims each pod spec names, and its inline flexVolumes, with their workloads. */
export function workloadUses(inv: Inventory, inlineTarget: (src: FlexSource) => CsiTarget): Uses {
  const byKey = new Map(inv.workloads.map((o) => [objectKey(o), o]));
  const uses: Uses = { users: new Map(), inline: [], refusals: [] };
  const add = (claim: string, use: WorkloadUse) => {
    const list = uses.users.get(claim) ?? [];
    if (!list.some((u) => objectKey(u.object) === objectKey(use.object))) list.push(use);
    uses.users.set(claim, list);
  };
  for (const o of inv.workloads) {
    const spec = at(o.doc, POD_SPEC_PATHS[o.kind] ?? 'spec');
    const top = topOf(o, byKey);
    const volumes = isObject(spec) && Array.isArray(spec.volumes) ? spec.volumes : [];
    const claims: string[] = [];
    for (const v of volumes) {
      if (!isObject(v)) continue;
      const claimName = at(v, 'persistentVolumeClaim.claimName');
      if (typeof claimName === 'string') claims.push(claimName);
      // A controlled pod's inline volumes are its template's, reported once with the template.
      if (isObject(v.flexVolume) && ('top' in top ? top.top === o : true)) inlineOf(o, v, inv, inlineTarget, uses);
    }
    // A StatefulSet's claims come from its volumeClaimTemplates: <template>-<set>-<ordinal>.
    const templates = o.kind === 'StatefulSet' ? at(o.doc, 'spec.volumeClaimTemplates') : undefined;
    if (Array.isArray(templates))
      for (const t of templates) {
        const name = at(t, 'metadata.name');
        if (typeof name !== 'string') continue;
        const pattern = new RegExp(`^${escape(name)}-${escape(o.name)}-\\d+$`);
        for (const claim of inv.claims.values()) if (claim.namespace === o.namespace && pattern.test(claim.name)) claims.push(claim.name);
      }
    const finished = finishedPhase(o);
    // An ended Job's template names the claim, but only its pods that are left can hold it, as finished pods.
    if (jobOver(o)) continue;
    for (const claim of claims) {
      const key = nsKey(o.namespace, claim);
      // Before its controller is looked at: a finished pod is started again by none (a Job's, a
      // CronJob's history, a Deployment's evicted pod), and whatever owns it, it must go.
      if (finished) add(key, { object: o, action: { kind: 'finished', phase: finished } });
      else if ('missing' in top) add(key, { object: o, action: { kind: 'pod' }, refusal: `PersistentVolumeClaim ${key} is used by ${label(o)}, whose controller ${top.missing} is not in the input: it would start the pod again mid-move` });
      else if (top.top.kind === 'Job') add(key, { object: top.top, action: { kind: 'pod' }, refusal: `PersistentVolumeClaim ${key} is used by ${label(top.top)}: a Job cannot be stopped and started again; plan the move once it is done` });
      else {
        const note = top.top.kind === 'Pod' ? rerunNote(top.top) : undefined;
        add(key, { object: top.top, action: actionOf(top.top), ...(note ? { note } : {}) });
      }
    }
  }
  return uses;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function inlineOf(o: KubeObject, volume: JsonObject, inv: Inventory, inlineTarget: (src: FlexSource) => CsiTarget, uses: Uses): void {
  const name = typeof volume.name === 'string' ? volume.name : '?';
  const flex = volume.flexVolume as JsonObject;
  const field = `${POD_SPEC_PATHS[o.kind] ?? 'spec'}.volumes[${name}].flexVolume`;
  const driver = typeof flex.driver === 'string' ? flex.driver : '';
  try {
    if (!driver) throw new TargetRefusal(`${field}.driver`, 'is missing');
    const options = stringMap(flex.options, `${field}.options`);
    // An inline volume's secretRef names a Secret of the pod's own namespace (getSecretNameAndNamespace).
    const secretName = isObject(flex.secretRef) && typeof flex.secretRef.name === 'string' ? flex.secretRef.name : undefined;
    const secretObject = secretName ? inv.secrets.get(nsKey(o.namespace, secretName)) : undefined;
    const src: FlexSource = {
      driver,
      options,
      fsType: typeof flex.fsType === 'string' ? flex.fsType : '',
      readOnly: flex.readOnly === true,
      ...(secretName ? { secret: { name: secretName, namespace: o.namespace } } : {}),
      ...(secretObject ? { secretData: fields(secretObject).stringMap('data') } : {}),
      name,
      secretInInput: (namespace, secret) => secretInInput(inv, namespace, secret),
    };
    const target = inlineTarget(src);
    if (target.route === 'twinvol')
      throw new TargetRefusal(field, `twinvol's CSI inline volumes are made and deleted with their pod (csi/ephemeral.ts), so they cannot reach volume ${target.volumeHandle}: give it a PV (csi.volumeHandle: ${target.volumeHandle}) and a claim`);
    const notes = [...target.notes];
    if (target.route === 'exec') notes.push(`the driver now sees kubelet's inline volume id (csi-<hash>) as kubernetes.io/pvOrVolumeName, not "${name}"`);
    uses.inline.push({
      object: o,
      volume: name,
      driver,
      replacement: {
        name,
        csi: {
          driver: target.driver,
          ...(target.fsType ? { fsType: target.fsType } : {}),
          ...(target.readOnly ? { readOnly: true } : {}),
          ...(Object.keys(target.attributes).length ? { volumeAttributes: target.attributes } : {}),
          ...(target.secretRef ? { nodePublishSecretRef: { name: target.secretRef.name } } : {}),
        },
      },
      notes,
    });
  } catch (err) {
    if (!(err instanceof TargetRefusal) && !(err instanceof Refusal)) throw err;
    const message = err instanceof TargetRefusal && !err.field.startsWith(field) ? `${field}: ${err.message.replace(/^spec\.flexVolume\./, '')}` : err.message;
    uses.refusals.push(`${label(o)}: ${message}`);
    uses.inline.push({ object: o, volume: name, driver, notes: [message] });
  }
}

function stringMap(value: Json | undefined, field: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) throw new TargetRefusal(field, 'must be a mapping of strings');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw new TargetRefusal(`${field}.${k}`, 'must be a string');
    out[k] = v;
  }
  return out;
}
