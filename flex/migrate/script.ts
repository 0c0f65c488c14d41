import { COPY_OF_LABEL } from './input.js';
import { at } from './objects.js';
import type { Move } from './plan.js';
import type { WorkloadUse } from './workloads.js';
import { shQuote } from '../shell-quote.js';

/**
 * The steps of a move (or of its rollback) as data, rendered twice: as the commands of STEPS.md and as
 * migrate.sh / rollback.sh. Each line is one kubectl call of a kind:
 * - require: a read that must give `want` now, in a dry run too (the cluster is what the plan assumed);
 * - change: a write; a dry run sends it with --dry-run=server, so the API server validates and discards it;
 * - create: applying a new manifest; a dry run uses --dry-run=client, because the old PV still exists
 *   then and a PV's volume source cannot change, so the server would refuse what the real run does;
 * - await: a read that must come to give `want` (polled until the deadline) before the next step;
 * - settle: a kubectl wait or rollout status, run only with --apply.
 */
export interface Line {
  kind: 'require' | 'change' | 'create' | 'await' | 'settle';
  argv: string[];
  want?: string;
  /** await only: no pod names this claim (namespace, claim), not a kubectl read (emit.ts await_unused). */
  claimUsers?: [string, string];
  /** settle only: this pod (namespace, name) is Ready or has Succeeded, not a kubectl read (emit.ts settle_pod). */
  pod?: [string, string];
  /** settle only: every pod this object (namespace, kind/name) wants is ready, not a kubectl read (emit.ts settle_ready). */
  ready?: [string, string];
}

export interface Step {
  title: string;
  lines: Line[];
}

/** Which way the steps go: forward to CSI, or back to the originals. */
export interface Direction {
  /** The PVs' current driver field and value, checked before anything changes. */
  currentDriver: (m: Move) => { path: string; value: string };
  /** The manifest file of each move to apply (relative to the script). */
  manifest: (m: Move, index: number) => string;
  /** Restore the original reclaim policy at the end (forward only: the originals carry theirs). */
  restorePolicy: boolean;
  /** CSI drivers that must be registered first. */
  csiDrivers: string[];
  /** Delete at the end the Secret copies the forward move made (the rollback: the originals need none). */
  removeSecretCopies: boolean;
}

const JSONPATH = (path: string) => `jsonpath={${path}}`;
const retainPatch = (policy: string) => JSON.stringify({ spec: { persistentVolumeReclaimPolicy: policy } });
/** The nodeSelector a stopped DaemonSet gets: no node has this label. */
const STOP_LABEL = 'migrate.twinvol.io/stopped';

export function steps(moves: readonly Move[], dir: Direction, podFile: (u: WorkloadUse) => string): Step[] {
  // Nothing planned: no step, not eight empty ones.
  if (!moves.length) return [];
  const claims = moves.filter((m) => m.claim);
  const users = uniqueUsers(moves);
  const out: Step[] = [];
  out.push({
    title: 'Check that the cluster is as planned: each PV still has its driver and claim, and each CSI driver is registered',
    lines: [
      ...dir.csiDrivers.map((d): Line => ({ kind: 'require', argv: ['get', 'csidriver', d, '-o', 'name'], want: `csidriver.storage.k8s.io/${d}` })),
      ...moves.map((m): Line => {
        const c = dir.currentDriver(m);
        return { kind: 'require', argv: ['get', 'pv', m.pv.name, '-o', JSONPATH(c.path)], want: c.value };
      }),
      ...claims.map((m): Line => ({ kind: 'require', argv: ['get', 'pvc', '-n', m.claim?.namespace ?? '', m.claim?.name ?? '', '-o', JSONPATH('.spec.volumeName')], want: m.pv.name })),
    ],
  });
  out.push({
    title: 'Keep the data whatever happens: set the reclaim policy of the PVs to Retain',
    lines: moves.flatMap((m): Line[] => [
      { kind: 'change', argv: ['patch', 'pv', m.pv.name, '--type', 'merge', '-p', retainPatch('Retain')] },
      { kind: 'await', argv: ['get', 'pv', m.pv.name, '-o', JSONPATH('.spec.persistentVolumeReclaimPolicy')], want: 'Retain' },
    ]),
  });
  if (users.length || claims.length)
    out.push({
      title: 'Stop the workloads that use the claims, and wait until no pod uses them',
      lines: [
        ...users.map((u): Line => ({ kind: 'change', argv: stopArgv(u) })),
        ...claims.map((m): Line => ({ kind: 'await', argv: [], claimUsers: [m.claim?.namespace ?? '', m.claim?.name ?? ''] })),
      ],
    });
  if (claims.length)
    out.push({
      title: 'Delete the claims (the PVs are Retain: the data stays)',
      lines: claims.flatMap((m): Line[] => [
        { kind: 'change', argv: ['delete', 'pvc', '-n', m.claim?.namespace ?? '', m.claim?.name ?? '', '--wait=false', '--ignore-not-found'] },
        { kind: 'await', argv: ['get', 'pvc', '-n', m.claim?.namespace ?? '', m.claim?.name ?? '', '--ignore-not-found', '-o', 'name'], want: '' },
      ]),
    });
  out.push({
    title: 'Delete the old PVs (Retain: only the API objects go)',
    lines: moves.flatMap((m): Line[] => [
      { kind: 'change', argv: ['delete', 'pv', m.pv.name, '--wait=false', '--ignore-not-found'] },
      { kind: 'await', argv: ['get', 'pv', m.pv.name, '--ignore-not-found', '-o', 'name'], want: '' },
    ]),
  });
  out.push({
    title: 'Apply the new PVs and claims, and wait until each claim is Bound to its PV',
    lines: moves.flatMap((m, i): Line[] => [
      { kind: 'create', argv: ['apply', '-f', dir.manifest(m, i)] },
      m.claim
        ? { kind: 'await', argv: ['get', 'pvc', '-n', m.claim.namespace, m.claim.name, '-o', JSONPATH('.status.phase')], want: 'Bound' }
        : { kind: 'await', argv: ['get', 'pv', m.pv.name, '-o', JSONPATH('.status.phase')], want: 'Available' },
    ]),
  });
  // A finished pod was deleted only to let the claim go: nothing starts it again.
  const started = users.filter((u) => u.action.kind !== 'finished');
  if (started.length)
    out.push({
      title: 'Start the workloads again, and wait until they are ready',
      lines: started.flatMap((u) => startLines(u, podFile(u))),
    });
  const restore = dir.restorePolicy ? moves.filter((m) => m.reclaimPolicy !== 'Retain') : [];
  if (restore.length)
    out.push({
      title: 'Restore the original reclaim policy on the new PVs',
      lines: restore.flatMap((m): Line[] => [
        { kind: 'change', argv: ['patch', 'pv', m.pv.name, '--type', 'merge', '-p', retainPatch(m.reclaimPolicy)] },
        { kind: 'await', argv: ['get', 'pv', m.pv.name, '-o', JSONPATH('.spec.persistentVolumeReclaimPolicy')], want: m.reclaimPolicy },
      ]),
    });
  const copies = dir.removeSecretCopies ? secretCopies(moves) : [];
  if (copies.length)
    out.push({
      title: 'Delete the Secret copies the move made, by name and only while they carry its label (the originals stay)',
      lines: copies.map((c): Line => ({ kind: 'change', argv: ['delete', 'secret', '-n', c.namespace, '-l', `${COPY_OF_LABEL}=${c.of}`, '--field-selector', `metadata.name=${c.name}`] })),
    });
  return out;
}

/** Each Secret copy a move of this plan makes, once. */
function secretCopies(moves: readonly Move[]): { namespace: string; name: string; of: string }[] {
  const seen = new Map<string, { namespace: string; name: string; of: string }>();
  for (const c of moves.flatMap((m) => (m.target.madeCopy ? [m.target.madeCopy] : []))) seen.set(`${c.namespace}/${c.name}`, c);
  return [...seen.values()];
}

/** Each workload once, even when it uses several of the claims. */
export function uniqueUsers(moves: readonly Move[]): WorkloadUse[] {
  const seen = new Map<string, WorkloadUse>();
  for (const m of moves) for (const u of m.users) seen.set(`${u.object.kind}/${u.object.namespace}/${u.object.name}`, u);
  return [...seen.values()];
}

const resource = (u: WorkloadUse) => `${u.object.kind.toLowerCase()}/${u.object.name}`;

function stopArgv(u: WorkloadUse): string[] {
  const ns = ['-n', u.object.namespace];
  switch (u.action.kind) {
    case 'scale':
      return ['scale', ...ns, resource(u), '--replicas=0'];
    case 'daemonset':
      return ['patch', ...ns, resource(u), '--type', 'merge', '-p', JSON.stringify({ spec: { template: { spec: { nodeSelector: { [STOP_LABEL]: 'true' } } } } })];
    case 'suspend':
      return ['patch', ...ns, resource(u), '--type', 'merge', '-p', JSON.stringify({ spec: { suspend: true } })];
    case 'pod':
    case 'finished':
      return ['delete', ...ns, resource(u), '--wait=false', '--ignore-not-found'];
  }
}

/**
 * The wait for a Deployment, StatefulSet or DaemonSet started again. kubectl rollout status refuses a
 * StatefulSet or DaemonSet whose updateStrategy is OnDelete ("rollout status is only available for
 * RollingUpdate strategy type", kubectl's polymorphichelpers/rollout_status.go), exit 1, and such
 * objects are common where FlexVolume still is: OnDelete was the default of apps/v1beta1 StatefulSets
 * and extensions/v1beta1 DaemonSets, and an object keeps it. Those are waited for by their counts.
 */
function rolloutLine(u: WorkloadUse): Line {
  if (at(u.object.doc, 'spec.updateStrategy.type') === 'OnDelete') return { kind: 'settle', argv: [], ready: [u.object.namespace, resource(u)] };
  return { kind: 'settle', argv: ['rollout', 'status', '-n', u.object.namespace, resource(u), TIMEOUT_WORD] };
}

function startLines(u: WorkloadUse, podFile: string): Line[] {
  const ns = ['-n', u.object.namespace];
  switch (u.action.kind) {
    case 'scale':
      return [
        { kind: 'change', argv: ['scale', ...ns, resource(u), `--replicas=${u.action.replicas}`] },
        ...(u.object.kind === 'Deployment' || u.object.kind === 'StatefulSet' ? [rolloutLine(u)] : []),
      ];
    case 'daemonset':
      return [
        // A merge patch's null removes the key, and is no change once it is gone: a JSON patch `remove`
        // failed on a missing key, so a run gone on with `--from` this step stopped here every time.
        { kind: 'change', argv: ['patch', ...ns, resource(u), '--type', 'merge', '-p', JSON.stringify({ spec: { template: { spec: { nodeSelector: { [STOP_LABEL]: null } } } } })] },
        rolloutLine(u),
      ];
    case 'suspend':
      return [{ kind: 'change', argv: ['patch', ...ns, resource(u), '--type', 'merge', '-p', JSON.stringify({ spec: { suspend: u.action.suspend } })] }];
    case 'pod':
      // Not `kubectl wait --for=condition=Ready`: a pod whose restartPolicy is Never or OnFailure
      // runs to completion and is never Ready, and the step stopped at every such pod.
      return [
        { kind: 'create', argv: ['apply', '-f', podFile] },
        { kind: 'settle', argv: [], pod: [u.object.namespace, u.object.name] },
      ];
    case 'finished':
      return [];
  }
}

/** The one word the script expands: the wait's deadline, which the operator sets with TIMEOUT. */
const TIMEOUT_WORD = '--timeout=${TIMEOUT}s';

/**
 * A word for bash: single-quoted unless it is plainly safe. Only TIMEOUT_WORD itself stays
 * expandable: a word from the input that merely held "${TIMEOUT}" was once double-quoted whole, and
 * `web${TIMEOUT}$(touch PWNED)` ran its command substitution.
 */
export function shellWord(word: string): string {
  if (/^[A-Za-z0-9_./=:,@%+-]+$/.test(word)) return word;
  if (word === TIMEOUT_WORD) return `"${word}"`;
  return shQuote(word);
}

const words = (argv: readonly string[]) => argv.map(shellWord).join(' ');

/** How a line reads in STEPS.md: the kubectl command, and what must hold. */
export function describeLine(l: Line): string {
  if (l.claimUsers) return `no pod in namespace ${l.claimUsers[0]} names claim ${l.claimUsers[1]}, finished or not (kubectl get pods -n ${l.claimUsers[0]}); a finished pod left is named, to be deleted`;
  if (l.pod) return `kubectl get pod -n ${l.pod[0]} ${l.pod[1]}   # wait until it is Ready, or has Succeeded (run to completion); if it fails, see its logs`;
  if (l.ready) return `kubectl get -n ${l.ready[0]} ${l.ready[1]}   # wait until every pod it wants is ready (updateStrategy OnDelete, which kubectl rollout status refuses)`;
  const cmd = `kubectl ${words(l.argv).replaceAll('${TIMEOUT}', '300')}`;
  if (l.kind === 'require') return `${cmd}   # must print: ${l.want || '(nothing)'}`;
  if (l.kind === 'await') return `${cmd}   # wait until it prints: ${l.want || '(nothing)'}`;
  return cmd;
}

/** The bash line of one step line (the helpers are in the script's preamble, emit.ts). */
export function bashLine(l: Line): string {
  if (l.claimUsers) return `await_unused ${shellWord(l.claimUsers[0])} ${shellWord(l.claimUsers[1])}`;
  if (l.pod) return `settle_pod ${shellWord(l.pod[0])} ${shellWord(l.pod[1])}`;
  if (l.ready) return `settle_ready ${shellWord(l.ready[0])} ${shellWord(l.ready[1])}`;
  switch (l.kind) {
    case 'require':
      return `require ${shellWord(l.want ?? '')} kubectl ${words(l.argv)}`;
    case 'await':
      return `await ${l.want === '' ? "''" : shellWord(l.want ?? '')} kubectl ${words(l.argv)}`;
    case 'change':
      return `change ${words(l.argv)}`;
    case 'create':
      return `create ${words(l.argv)}`;
    case 'settle':
      return `settle ${words(l.argv)}`;
  }
}
