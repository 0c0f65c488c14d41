import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Document, parse, visit } from 'yaml';
import { redact, secretsInOptions } from '../../shared/index.js';
import { cleaned, isObject, type Json, type JsonObject, label } from './objects.js';
import { type Move, type Plan, withRequest } from './plan.js';
import { bashLine, describeLine, type Direction, type Step, steps, uniqueUsers } from './script.js';
import type { WorkloadUse } from './workloads.js';
import { shQuote } from '../shell-quote.js';

/** Multi-document YAML, one `---` before each document, as kubectl apply -f takes it. */
export function yamlDocuments(docs: readonly JsonObject[]): string {
  return docs.map((d) => `---\n${yamlText(d)}`).join('');
}

/** One value as YAML that kubectl reads back as written (see `stringsQuoted`). */
function yamlText(value: unknown): string {
  return stringsQuoted(new Document(value)).toString({ lineWidth: 0 });
}

/**
 * Every string that a YAML 1.1 or 1.2 reader would take for something else, quoted. The library writes
 * YAML 1.2, where `yes`, `on`, `no` and `0b101` are strings and go bare; kubectl reads YAML 1.1
 * (sigs.k8s.io/yaml), where they are booleans and numbers: a label `tier: yes` was refused, and a
 * rollback PV's `readonly: "no"` option would have failed its apply after the CSI PV was deleted.
 */
function stringsQuoted(doc: Document): Document {
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && readsAsOther(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  return doc;
}

function readsAsOther(text: string): boolean {
  try {
    return (['1.1', '1.2'] as const).some((version) => typeof parse(text, { version }) !== 'string');
  } catch {
    return true;
  }
}

/** The new objects of each move: its new Secret (once per Secret), the PV, the claim. */
export function newObjects(moves: readonly Move[]): JsonObject[][] {
  const seen = new Set<string>();
  return moves.map((m) => {
    const docs: JsonObject[] = [];
    const secret = m.target.newSecret;
    const key = secret ? JSON.stringify(secret.metadata) : '';
    if (secret && !seen.has(key)) {
      seen.add(key);
      docs.push(secret);
    }
    docs.push(m.newPv);
    if (m.newClaim) docs.push(m.newClaim);
    return docs;
  });
}

/** The original objects of each move, as they can be applied again (objects.ts cleaned). */
function rollbackObjects(moves: readonly Move[]): JsonObject[][] {
  return moves.map((m) => [cleaned(m.pv.doc), ...(m.claim ? [bindableClaim(cleaned(m.claim.doc), m.pv.doc, m.claimRequest)] : [])]);
}

/**
 * The original claim as it can bind again, its storage class written out: one that had none would get the cluster's
 * default class from admission when re-created, and never bind to its class-less PV (the rollback
 * would wait out its deadline with the workloads stopped). The PV's class, or "" for none, is what
 * the claim was bound with; the forward claim is written the same way (plan.ts newClaimOf). A claim
 * that asks more than its PV holds asks what it holds (`request`, plan.ts fittedRequest), for the
 * same reason.
 */
function bindableClaim(claim: JsonObject, pv: JsonObject, request: string | undefined): JsonObject {
  const spec = isObject(claim.spec) ? claim.spec : {};
  const pvClass = isObject(pv.spec) && typeof pv.spec.storageClassName === 'string' ? pv.spec.storageClassName : '';
  const storageClassName = typeof spec.storageClassName === 'string' ? spec.storageClassName : pvClass;
  const resources = withRequest(isObject(spec.resources) ? spec.resources : {}, request);
  return { ...claim, spec: { ...spec, storageClassName, ...(Object.keys(resources).length ? { resources } : {}) } };
}

/** The report on stderr: one line per planned PV, skipped object, inline volume and note. */
export function reportLines(p: Plan): string[] {
  const lines: string[] = [];
  for (const m of p.moves) {
    const claim = m.claim ? `, claim ${m.claim.namespace}/${m.claim.name}` : ', no claim';
    const users = usersOf(m).map((u) => `; ${u}`).join('');
    lines.push(`planned: ${label(m.pv)} (${m.flexDriver}) -> ${routeOf(m)} volumeHandle ${m.target.volumeHandle}${claim}${users}`);
  }
  for (const s of p.skipped) lines.push(`skipped: ${s}`);
  // The attributes less any secret-looking one (an inline password): the report goes to a terminal or
  // a CI log; the replacement as it must be written is in STEPS.md, which is then the owner's alone.
  const shown = (v: JsonObject) => JSON.stringify(v, (key, value: unknown) => (key === 'volumeAttributes' ? redact(value) : value));
  for (const v of p.inline) if (v.replacement) lines.push(`inline: ${label(v.object)} volume ${v.volume} (${v.driver}) -> ${shown(v.replacement)}${v.notes.length ? ` (${v.notes.join('; ')})` : ''}`);
  for (const n of p.notes) lines.push(`note: ${n}`);
  return lines;
}

/** What the move does to the claim's users: "restart A, B", "delete finished Pod ns/x (Succeeded)". */
function usersOf(m: Move): string[] {
  const restarted = m.users.filter((u) => u.action.kind !== 'finished').map((u) => label(u.object));
  const finished = m.users.flatMap((u) => (u.action.kind === 'finished' ? [`${label(u.object)} (${u.action.phase})`] : []));
  return [...(restarted.length ? [`restart ${restarted.join(', ')}`] : []), ...(finished.length ? [`delete finished ${finished.join(', ')}`] : [])];
}

const routeOf = (m: Move) => (m.target.route === 'twinvol' ? `${m.target.driver} (same twinvol volume)` : m.target.route === 'exec' ? `${m.target.driver} (exec backend, driver ${m.flexDriver})` : m.target.driver);

const slug = (s: string) => s.replace(/[^A-Za-z0-9_.-]+/g, '-');

/**
 * 0600 for a file whose objects carry a secret value: a Secret, or one among a flexVolume's options, a
 * CSI volume's attributes or a PV's spec.mountOptions (a password written inline: shared/log.ts
 * secretsInOptions); else 0644. A vendor mapping moves a CIFS `password=` from the options' mountOptions
 * string into the new PV's spec.mountOptions list (mappings.ts), one item of its own.
 */
function modeFor(docs: readonly JsonObject[]): number {
  const carries = (value: Json, key: string): boolean => {
    if (key === 'mountOptions' && Array.isArray(value)) return secretsInOptions({ mountOptions: value.filter((v) => typeof v === 'string').join(',') }).length > 0;
    if (Array.isArray(value)) return value.some((v) => carries(v, ''));
    if (!isObject(value)) return false;
    if ((key === 'options' || key === 'volumeAttributes') && secretsInOptions(value).length) return true;
    return Object.entries(value).some(([k, v]) => carries(v, k));
  };
  return docs.some((d) => d.kind === 'Secret' || carries(d, '')) ? 0o600 : 0o644;
}

/**
 * --out DIR: manifests/NN-<pv>.yaml (new objects), rollback/NN-<pv>.yaml (the originals, cleaned),
 * pods/<ns>_<name>.yaml (pods nothing controls, re-created after the move), STEPS.md, migrate.sh and
 * rollback.sh. The directory must be new or empty: a plan never mixes with an older one.
 */
export function writeOut(dir: string, p: Plan, inputs: readonly string[]): string[] {
  try {
    if (existsSync(dir) && readdirSync(dir).length) throw new OutError(`--out ${dir}: the directory exists and is not empty`);
    return writeFiles(dir, p, inputs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code) throw new OutError(`--out ${dir}: cannot be written (${code === 'ENOTDIR' ? 'not a directory' : code})`);
    throw err;
  }
}

function writeFiles(dir: string, p: Plan, inputs: readonly string[]): string[] {
  const width = String(p.moves.length).length < 2 ? 2 : String(p.moves.length).length;
  const file = (m: Move, i: number) => `${String(i + 1).padStart(width, '0')}-${slug(m.pv.name)}.yaml`;
  const podFile = (u: WorkloadUse) => `pods/${slug(u.object.namespace)}_${slug(u.object.name)}.yaml`;
  const written: string[] = [];
  const write = (rel: string, text: string, mode = 0o644) => {
    mkdirSync(join(dir, rel, '..'), { recursive: true });
    writeFileSync(join(dir, rel), text, { mode });
    chmodSync(join(dir, rel), mode);
    written.push(rel);
  };
  mkdirSync(dir, { recursive: true });
  const fresh = newObjects(p.moves);
  const originals = rollbackObjects(p.moves);
  p.moves.forEach((m, i) => {
    // A manifest that carries a copied Secret (a vendor driver's credentials) is the owner's alone,
    // from its creation on: writeFileSync's mode applies as the file is made. So is one that carries a
    // password written inline in a PV, or a pod's volume.
    const docs = fresh[i] ?? [];
    write(`manifests/${file(m, i)}`, yamlDocuments(docs), modeFor(docs));
    write(`rollback/${file(m, i)}`, yamlDocuments(originals[i] ?? []), modeFor(originals[i] ?? []));
  });
  for (const u of uniqueUsers(p.moves)) if (u.action.kind === 'pod') write(podFile(u), yamlDocuments([cleaned(u.object.doc)]), modeFor([u.object.doc]));
  const csiDrivers = [...new Set(p.moves.map((m) => m.target.driver))];
  const forward: Direction = {
    currentDriver: (m) => ({ path: '.spec.flexVolume.driver', value: m.flexDriver }),
    manifest: (m, i) => `manifests/${file(m, i)}`,
    restorePolicy: true,
    csiDrivers,
    removeSecretCopies: false,
  };
  const back: Direction = {
    currentDriver: (m) => ({ path: '.spec.csi.driver', value: m.target.driver }),
    manifest: (m, i) => `rollback/${file(m, i)}`,
    restorePolicy: false,
    csiDrivers: [],
    removeSecretCopies: true,
  };
  const forwardSteps = steps(p.moves, forward, podFile);
  const backSteps = steps(p.moves, back, podFile);
  write('STEPS.md', stepsMarkdown(p, forwardSteps, backSteps, inputs), modeFor(p.inline.flatMap((v) => (v.replacement ? [v.replacement] : []))));
  write('migrate.sh', script(forwardSteps, `moves ${p.moves.length} FlexVolume PV(s) to CSI`), 0o755);
  write('rollback.sh', script(backSteps, `puts the ${p.moves.length} PV(s) back on FlexVolume (the originals in rollback/)`), 0o755);
  return written;
}

export class OutError extends Error {}

function stepsMarkdown(p: Plan, forward: Step[], back: Step[], inputs: readonly string[]): string {
  const out: string[] = [];
  out.push(`# Moving ${p.moves.length} FlexVolume PV(s) to CSI`, '');
  out.push(`Planned by \`twinvol migrate plan\` from ${inputs.join(', ')}, without talking to a cluster.`);
  out.push('`./migrate.sh` runs the steps below with kubectl, checking each before the next; it is a dry run');
  out.push('(changes sent with `--dry-run`) unless given `--apply`. `./rollback.sh` undoes the move the same way.', '');
  out.push('A run that stops after step 1 names its step N: once the cause is mended, go on with `--apply --from N`.', '');
  out.push('## What moves', '', '| PV | claim | FlexVolume driver | CSI driver | volumeHandle | workloads |', '|---|---|---|---|---|---|');
  for (const m of p.moves)
    out.push(`| ${m.pv.name} | ${m.claim ? `${m.claim.namespace}/${m.claim.name}` : '-'} | ${m.flexDriver} | ${routeOf(m)} | ${m.target.volumeHandle} | ${usersOf(m).join('; ') || '-'} |`);
  if (p.skipped.length) out.push('', `## Not moved (${p.skipped.length})`, '', ...p.skipped.map((s) => `- ${s}`));
  const inline = p.inline.filter((v) => v.replacement);
  if (inline.length) {
    out.push('', '## Inline flexVolume volumes', '', 'Pods and pod templates are not changed by the steps: edit each volume to its replacement.');
    for (const v of inline) out.push('', `- ${label(v.object)}, volume \`${v.volume}\` (${v.driver})${v.notes.length ? `: ${v.notes.join('; ')}` : ''}`, '', '```yaml', yamlText(v.replacement).trimEnd(), '```');
  }
  if (p.notes.length) out.push('', '## Notes', '', ...p.notes.map((n) => `- ${n}`));
  const render = (list: Step[]) =>
    list.length
      ? list.flatMap((s, i) => ['', `${i + 1}. ${s.title}`, '', '   ```sh', ...s.lines.map((l) => `   ${describeLine(l)}`), '   ```'])
      : ['', 'Nothing to move: every FlexVolume PV was skipped (see above).'];
  out.push('', '## Steps (./migrate.sh)', ...render(forward));
  out.push('', '## Rollback (./rollback.sh)', '', 'The original PVs and claims, cleaned of status, uids and server fields, are in rollback/.', ...render(back));
  return `${out.join('\n')}\n`;
}

const PREAMBLE = `set -euo pipefail
cd "$(dirname "$0")"
APPLY=0 FROM=1 STEP=0 SKIPPING=0
usage() { echo "usage: $0 [--apply] [--from STEP]" >&2; exit 2; }
while (( $# )); do
  case "$1" in
    --apply) APPLY=1 ;;
    --from) [[ "\${2:-}" =~ ^[1-9][0-9]{0,2}$ ]] || usage; FROM=$2; shift ;;
    *) usage ;;
  esac
  shift
done
TIMEOUT="\${MIGRATE_TIMEOUT:-300}"
# Checked before any change: read in bash arithmetic, "10m" failed each wait as an expansion error that
# set -e does not stop at, so every wait was skipped and the run went on to "done".
[[ $TIMEOUT =~ ^[1-9][0-9]{0,5}$ ]] || { echo "$0: MIGRATE_TIMEOUT '$TIMEOUT' must be a whole number of seconds, 1 or more" >&2; exit 2; }
# LAST, the number of steps, is set above: --from past it skipped every step and said "done".
(( LAST == 0 || FROM <= LAST )) || { echo "$0: --from $FROM: there are $LAST steps" >&2; exit 2; }
(( APPLY )) || echo "dry run: changes are sent with --dry-run; run with --apply to make them"
# A run that stops part of the way says where to go on from: each step's changes can be made again
# (patches, --ignore-not-found deletes, apply), but the first step's checks hold only before any.
trap 'status=$?; if (( status && STEP > 1 )); then echo "stopped in step $STEP; once its cause is mended, go on with: $0\$( (( APPLY )) && echo " --apply") --from $STEP" >&2; fi' EXIT

step() {
  STEP=$1
  SKIPPING=$(( STEP < FROM ))
  printf '\\n== %s. %s%s\\n' "$1" "$2" "$( (( SKIPPING )) && echo ' (skipped: --from)')"
}
# A change: made with --apply; else validated by the API server and discarded.
change() { (( SKIPPING )) && return 0; if (( APPLY )); then kubectl "$@"; else kubectl "$@" --dry-run=server; fi; }
# A new object: in a dry run the old PV still exists, so only the client checks it.
create() { (( SKIPPING )) && return 0; if (( APPLY )); then kubectl "$@"; else kubectl "$@" --dry-run=client; fi; }
# A wait on what a change did (kubectl wait, rollout status): with --apply only.
settle() { (( SKIPPING )) && return 0; if (( APPLY )); then kubectl "$@"; else echo "(dry run) would run: kubectl $*"; fi; }
# What must hold now, in a dry run too.
require() {
  (( SKIPPING )) && return 0
  local want=$1 got
  shift
  # Under set -e a failed command ended the script here with only kubectl's own words.
  got=$("$@") || { echo "check failed: $*: the command failed (exit $?), expected '$want'" >&2; exit 1; }
  [[ $got == "$want" ]] || { echo "check failed: $*: got '$got', expected '$want'" >&2; exit 1; }
}
# Runs a check ("$3" ...) every 2 s until it answers 0, or stops the script once TIMEOUT seconds have
# passed, naming its subject ($1), what the check last saw (it sets \`seen\`) and what was awaited ($2).
poll() {
  local subject=$1 expected=$2 seen='' deadline=$((SECONDS + TIMEOUT))
  shift 2
  while :; do
    "$@" && return 0
    (( SECONDS < deadline )) || { echo "check failed after $TIMEOUT s: $subject: $seen, expected $expected" >&2; exit 1; }
    sleep 2
  done
}
# What a change must bring about, polled (with --apply only).
await() {
  (( SKIPPING )) && return 0
  if (( ! APPLY )); then echo "(dry run) would wait for: \${*:2} = '$1'"; return 0; fi
  poll "\${*:2}" "'$1'" output_is "$@"
}
# Whether "$2" ... prints $1 now. A read that fails is not yet what is awaited: a failed
# \`get --ignore-not-found\` prints nothing, as a deleted object does, and the deletes of claims and PVs
# went on before theirs were done.
output_is() {
  local want=$1 got
  shift
  if got=$("$@" 2>/dev/null); then
    [[ $got == "$want" ]] && return 0
    seen="got '$got'"
  else
    seen="the command failed (exit $?)"
  fi
  return 1
}
# The pods of a namespace that name a claim, one line each: "<pod> <phase>", the phase Terminating for
# one being deleted. A list that cannot be read fails, and is no answer: piped into grep -c, a failed
# kubectl (forbidden, unreachable) once read as 0 pods, and the claims were deleted.
claim_users() {
  local list name phase deleting claims
  list=$(kubectl get pods -n "$1" -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.status.phase}{"|"}{.metadata.deletionTimestamp}{"|"}{range .spec.volumes[*]}{.persistentVolumeClaim.claimName}{" "}{end}{"\\n"}{end}') || return 1
  while IFS='|' read -r name phase deleting claims; do
    [[ " $claims " == *" $2 "* ]] || continue
    [[ -z $deleting ]] || phase=Terminating
    echo "$name \${phase:-Pending}"
  done <<<"$list"
}
# Until no pod names a claim (with --apply only). The PVC-protection controller keeps a claim while any
# pod scheduled to a node names it, finished (Succeeded, Failed) or not, and a finished pod stays until
# someone deletes it: when only such pods are left the wait stops at once and names them, not at its
# deadline.
await_unused() {
  (( SKIPPING )) && return 0
  if (( ! APPLY )); then echo "(dry run) would wait until no pod in namespace $1 names claim $2"; return 0; fi
  poll "claim $2 in namespace $1" 'no pod to name it' claim_unused "$1" "$2"
}
claim_unused() {
  local ns=$1 claim=$2 users names n
  if users=$(claim_users "$ns" "$claim"); then
    [[ -z $users ]] && return 0
    seen="named by \${users//$'\\n'/, }"
    if ! grep -qvE ' (Succeeded|Failed)$' <<<"$users"; then
      names=''
      while read -r n _; do names+=" $n"; done <<<"$users"
      echo "check failed: claim $claim in namespace $ns is $seen: finished pods, which Kubernetes counts as users of a claim until they are deleted; delete them (kubectl delete pod -n $ns$names)" >&2
      exit 1
    fi
  else
    seen="the pod list could not be read (exit $?)"
  fi
  return 1
}
# A pod the move re-created (with --apply only): until it is Ready, or has Succeeded, as a pod whose
# restartPolicy is Never or OnFailure does once it ran to completion (it is never Ready then). One that
# failed is the operator's to look at: the tool cannot tell why.
settle_pod() {
  (( SKIPPING )) && return 0
  if (( ! APPLY )); then echo "(dry run) would wait until pod $2 in namespace $1 is Ready or has Succeeded"; return 0; fi
  poll "pod $2 in namespace $1" 'Ready, or Succeeded' pod_settled "$1" "$2"
}
# A StatefulSet or DaemonSet whose updateStrategy is OnDelete, which kubectl rollout status refuses
# (with --apply only): until its controller has seen the change and every pod it wants is ready.
settle_ready() {
  (( SKIPPING )) && return 0
  if (( ! APPLY )); then echo "(dry run) would wait until every pod of $2 in namespace $1 is ready"; return 0; fi
  poll "$2 in namespace $1" 'every pod it wants ready' all_ready "$1" "$2"
}
# Compared as strings, not in bash arithmetic, where a word that is no number is an error set -e passes over.
all_ready() {
  local state generation observed want ready
  if state=$(kubectl get -n "$1" "$2" -o 'jsonpath={.metadata.generation}|{.status.observedGeneration}|{.spec.replicas}{.status.desiredNumberScheduled}|{.status.readyReplicas}{.status.numberReady}' 2>/dev/null); then
    IFS='|' read -r generation observed want ready <<<"$state"
    [[ -n $generation && $observed == "$generation" && \${ready:-0} == "\${want:-0}" ]] && return 0
    seen="\${ready:-0} of \${want:-0} pods ready, generation \${observed:-none} seen of $generation"
  else
    seen="the command failed (exit $?)"
  fi
  return 1
}
pod_settled() {
  local ns=$1 pod=$2 state
  if state=$(kubectl get pod -n "$ns" "$pod" -o 'jsonpath={.status.phase}/{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null); then
    case $state in
      */True) return 0 ;;
      Succeeded/*) echo "pod $pod in namespace $ns ran to completion (Succeeded)"; return 0 ;;
      Failed/*)
        echo "check failed: pod $pod in namespace $ns failed after it was started again (its claims are moved): see kubectl logs -n $ns $pod and kubectl describe pod -n $ns $pod; to run it again, delete it (kubectl delete pod -n $ns $pod) and go on from this step" >&2
        exit 1 ;;
    esac
    seen="phase \${state%%/*}, Ready \${state#*/}"
  else
    seen="the command failed (exit $?)"
  fi
  return 1
}
`;

function script(list: Step[], what: string): string {
  const body = list.length
    ? list.flatMap((s, i) => ['', `step ${i + 1} ${shQuote(s.title)}`, ...s.lines.map(bashLine)])
    : ['', 'echo "nothing to move: every FlexVolume PV was skipped (STEPS.md says why)"'];
  return `#!/usr/bin/env bash\n# Generated by twinvol migrate plan: ${what}. STEPS.md says what each step does.\nLAST=${list.length}\n${PREAMBLE}${body.join('\n')}\n\nprintf '\\ndone%s\\n' "$( (( APPLY )) || echo ' (dry run: nothing changed)')"\n`;
}

