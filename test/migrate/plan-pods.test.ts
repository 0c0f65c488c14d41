import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { linesOf, planOf, useFakeKubectl } from './plan-helpers.js';

/**
 * Pods that run to an end, and the move. The PVC-protection controller keeps a claim while any pod
 * scheduled to a node names it, finished or not (kube-controller-manager, pkg/controller/volume/
 * pvcprotection/pvc_protection_controller.go, podUsesPVC), and a finished pod stays until someone
 * deletes it: the move deletes the finished pods it knows of, and its wait names any other one at once. A bare pod whose restartPolicy is Never is never Ready once it has run: the start step takes
 * Succeeded as started, and stops at Failed saying what to do.
 *
 * The fake kubectl keeps each pod as a file (phase|ready|deleting|claims) and answers the reads the
 * way kubectl does: the pod list in whichever jsonpath the script asks for, `kubectl wait
 * --for=condition=Ready` only when the pod is Ready (else kubectl's timeout error).
 */
const PV = { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'logs' }, spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], persistentVolumeReclaimPolicy: 'Retain', claimRef: { namespace: 'shop', name: 'logs' }, flexVolume: { driver: 'acme/twinvol' } } };
const CLAIM = { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'logs', namespace: 'shop' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, volumeName: 'logs' } };
const volumes = [{ name: 'logs', persistentVolumeClaim: { claimName: 'logs' } }];
/** A bare pod that runs once (a loader), running when the plan is made. */
const LOADER = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'loader', namespace: 'shop' }, spec: { restartPolicy: 'Never', nodeName: 'n1', containers: [{ name: 'c', image: 'busybox' }], volumes }, status: { phase: 'Running' } };
/** A pod of a Job that is done; the Job itself is not in the input (kubectl get pods,deploy,... has no jobs). */
const NIGHTLY = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'nightly-1', namespace: 'shop', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly', uid: 'u1', controller: true }] },
  spec: { restartPolicy: 'Never', nodeName: 'n1', containers: [{ name: 'c', image: 'busybox' }], volumes },
  status: { phase: 'Succeeded' },
};

const KUBECTL = [
  '#!/usr/bin/env bash',
  'echo "$*" >> "$KUBECTL_LOG"',
  'P=$STATE/pods',
  'case "$*" in',
  '  "get csidriver csi.twinvol.io -o name") printf csidriver.storage.k8s.io/csi.twinvol.io ;;',
  '  "get pv logs -o jsonpath={.spec.flexVolume.driver}") printf acme/twinvol ;;',
  '  "get pvc -n shop logs -o jsonpath={.spec.volumeName}") printf logs ;;',
  '  "get pv logs -o jsonpath={.spec.persistentVolumeReclaimPolicy}") printf Retain ;;',
  '  "get pvc -n shop logs -o jsonpath={.status.phase}") printf Bound ;;',
  // The pod list: the name, phase and deletion of each pod with its claims (this script), or only
  // the claims (the script before), as kubectl prints each jsonpath.
  '  "get pods -n shop -o jsonpath="*)',
  '    for f in "$P"/*; do [[ -e $f ]] || continue',
  '      IFS="|" read -r phase ready deleting claims < "$f"',
  '      if [[ $* == *metadata.name* ]]; then printf "%s|%s|%s|%s \\n" "${f##*/}" "$phase" "$deleting" "$claims"; else printf "%s\\n" "$claims"; fi',
  '    done ;;',
  '  "get pod -n shop "*" -o jsonpath="*)',
  '    IFS="|" read -r phase ready deleting claims < "$P/$5" || [[ -n $phase ]] || exit 1',
  '    printf "%s/%s" "$phase" "$ready" ;;',
  '  "wait -n shop pod/"*" --for=condition=Ready "*)',
  '    pod=${4#pod/}; IFS="|" read -r phase ready deleting claims < "$P/$pod" || [[ -n $phase ]] || exit 1',
  '    [[ $ready == True ]] || { echo "error: timed out waiting for the condition on pods/$pod" >&2; exit 1; } ;;',
  '  "delete -n shop pod/"*) rm -f "$P/${4#pod/}" ;;',
  // A pod re-created from pods/: it has run by the time it is read, to RERUN (phase|ready).
  '  "apply -f pods/shop_"*) f=${3#pods/shop_}; printf "%s||logs" "$RERUN" > "$P/${f%.yaml}" ;;',
  'esac',
  'exit 0',
  '',
].join('\n');

const world = useFakeKubectl('plan-pods', KUBECTL);

let n = 0;
/** A plan of the PV and its claim with these pods, written to a new directory. */
function planned(pods: object[]): { dir: string; r: ReturnType<typeof planOf> } {
  const dir = join(world.root, `case-${++n}`);
  mkdirSync(dir);
  const input = join(dir, 'cluster.json');
  writeFileSync(input, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [PV, CLAIM, ...pods] }));
  return { dir, r: planOf({ files: [input], out: join(dir, 'plan') }) };
}

/** migrate.sh --apply with these pods in the "cluster" (name -> phase|ready|deleting|claims). */
function migrate(dir: string, pods: Record<string, string>, rerun = 'Running|True', timeout = '30') {
  const state = join(dir, 'state');
  mkdirSync(join(state, 'pods'), { recursive: true });
  for (const [name, line] of Object.entries(pods)) writeFileSync(join(state, 'pods', name), line);
  const log = join(dir, 'kubectl.log');
  writeFileSync(log, '');
  const env = { PATH: `${world.bin}:/usr/bin:/bin`, KUBECTL_LOG: log, STATE: state, RERUN: rerun, MIGRATE_TIMEOUT: timeout };
  const r = spawnSync('bash', [join(dir, 'plan', 'migrate.sh'), '--apply'], { env, encoding: 'utf8' });
  return { ...r, calls: readFileSync(log, 'utf8').trim().split('\n'), pods: readdirSync(join(state, 'pods')) };
}

describe('a finished pod that still names a claim', () => {
  it('of a Job the input does not hold: planned, deleted with the stop, never started again', () => {
    const { dir, r } = planned([NIGHTLY]);
    expect(linesOf(r.stderr, 'skipped')).toEqual([]);
    expect(r.exitCode).toBe(0);
    expect(linesOf(r.stderr, 'planned')).toEqual(['PersistentVolume/logs (acme/twinvol) -> csi.twinvol.io (same twinvol volume) volumeHandle logs, claim shop/logs; delete finished Pod shop/nightly-1 (Succeeded)']);
    expect(existsSync(join(dir, 'plan', 'pods'))).toBe(false);
    const run = migrate(dir, { 'nightly-1': 'Succeeded|False||logs' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.calls).toContain('delete -n shop pod/nightly-1 --wait=false --ignore-not-found');
    expect(run.calls.filter((c) => c.startsWith('apply -f pods/'))).toEqual([]);
    expect(run.pods).toEqual([]);
  });

  it('of a Job that the input holds, and that is over: the Job is no reason to keep the claim from moving', () => {
    const job = { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'nightly', namespace: 'shop' }, spec: { template: { spec: NIGHTLY.spec } }, status: { conditions: [{ type: 'Complete', status: 'True' }] } };
    const { r } = planned([job, NIGHTLY]);
    expect(linesOf(r.stderr, 'skipped')).toEqual([]);
    expect(r.exitCode).toBe(0);
    // One still running is refused as before: a Job cannot be stopped and started again.
    const running = { ...job, status: {} };
    expect(linesOf(planned([running]).r.stderr, 'skipped')).toEqual(['PersistentVolume/logs: PersistentVolumeClaim shop/logs is used by Job shop/nightly: a Job cannot be stopped and started again; plan the move once it is done']);
  });

  it('that the plan did not know of stops the wait at once, named, with what to do: no claim is deleted', () => {
    const { dir } = planned([]);
    const run = migrate(dir, { 'evicted-1': 'Failed|False||logs', 'web-2': 'Succeeded|False||other' });
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(
      'check failed: claim logs in namespace shop is named by evicted-1 Failed: finished pods, which Kubernetes counts as users of a claim until they are deleted; delete them (kubectl delete pod -n shop evicted-1)\n' +
        `stopped in step 3; once its cause is mended, go on with: ${join(dir, 'plan', 'migrate.sh')} --apply --from 3\n`,
    );
    expect(run.calls.filter((c) => c.startsWith('delete '))).toEqual([]);
  });

  it('that is being deleted is waited for like any pod, and named at the deadline', () => {
    const { dir } = planned([]);
    const run = migrate(dir, { 'nightly-2': 'Succeeded|False|2025-01-01T00:00:00Z|logs' }, 'Running|True', '1');
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('check failed after 1 s: claim logs in namespace shop: named by nightly-2 Terminating, expected no pod to name it\n');
  });

  it('a bare pod (restartPolicy Never) finished when the plan is made: deleted so that the claim can go, not started again (it would run again)', () => {
    const { dir, r } = planned([{ ...LOADER, status: { phase: 'Succeeded' } }]);
    expect(r.exitCode).toBe(0);
    expect(linesOf(r.stderr, 'note')).toEqual([]);
    const run = migrate(dir, { loader: 'Succeeded|False||logs' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.calls).toContain('delete -n shop pod/loader --wait=false --ignore-not-found');
    expect(run.calls.filter((c) => c.startsWith('apply -f pods/'))).toEqual([]);
  });
});

describe('a bare pod whose restartPolicy is Never', () => {
  it('is named in a note: it runs its command again from the start', () => {
    const { r } = planned([LOADER]);
    expect(linesOf(r.stderr, 'note')).toEqual([
      'Pod shop/loader (restartPolicy Never) is deleted, and re-created once the claims are moved: it runs its command again from the start; the scripts wait until it is Ready or has Succeeded, and stop if it fails',
    ]);
  });

  it('re-created, and run to completion (Succeeded, never Ready): the start step is done with it', () => {
    const { dir, r } = planned([LOADER]);
    expect(r.exitCode).toBe(0);
    const run = migrate(dir, { loader: 'Running|True||logs' }, 'Succeeded|False');
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('pod loader in namespace shop ran to completion (Succeeded)');
    expect(run.calls).toContain('apply -f pods/shop_loader.yaml');
  });

  it('re-created, and Ready: the start step is done with it', () => {
    const { dir } = planned([LOADER]);
    const run = migrate(dir, { loader: 'Running|True||logs' }, 'Running|True');
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  it('re-created, and Failed: the script stops there, saying what the operator must do', () => {
    const { dir } = planned([LOADER]);
    const run = migrate(dir, { loader: 'Running|True||logs' }, 'Failed|False');
    expect(run.status).toBe(1);
    const step = (readFileSync(join(dir, 'plan', 'migrate.sh'), 'utf8').match(/^step (\d+) 'Start the workloads again/m) ?? [])[1];
    expect(run.stderr).toBe(
      'check failed: pod loader in namespace shop failed after it was started again (its claims are moved): see kubectl logs -n shop loader and kubectl describe pod -n shop loader; to run it again, delete it (kubectl delete pod -n shop loader) and go on from this step\n' +
        `stopped in step ${step}; once its cause is mended, go on with: ${join(dir, 'plan', 'migrate.sh')} --apply --from ${step}\n`,
    );
  });
});


describe('MIGRATE_TIMEOUT', () => {
  // Read in bash arithmetic at the first wait, after step 2's patches: "10m" (kubectl's way of
  // writing it) once ended the run there with bash's "value too great for base", and went as
  // `--timeout=10ms` to kubectl rollout status.
  it.each(['10m', 'abc', '0', '-5', '1e3'])('%j is refused before anything is changed: exit 2, one line', (value) => {
    const { dir } = planned([LOADER]);
    const run = migrate(dir, { loader: 'Running|True||logs' }, 'Running|True', value);
    expect(run.stderr).toBe(`${join(dir, 'plan', 'migrate.sh')}: MIGRATE_TIMEOUT '${value}' must be a whole number of seconds, 1 or more\n`);
    expect(run.status).toBe(2);
    expect(run.calls).toEqual(['']);
  });
});

describe('--from past the last step', () => {
  // `--from 80` for 8 once skipped every step and said "done", exit 0, with nothing moved.
  it('is refused: exit 2, naming how many steps there are, and nothing is run', () => {
    const { dir } = planned([LOADER]);
    const script = join(dir, 'plan', 'migrate.sh');
    const steps = readFileSync(script, 'utf8').match(/^step \d+ /gm)?.length ?? 0;
    expect(steps).toBeGreaterThan(1);
    const log = join(dir, 'kubectl.log');
    const env = { PATH: `${world.bin}:/usr/bin:/bin`, KUBECTL_LOG: log, STATE: join(dir, 'state') };
    const r = spawnSync('bash', [script, '--apply', '--from', String(steps + 1)], { env, encoding: 'utf8' });
    expect(r.stderr).toBe(`${script}: --from ${steps + 1}: there are ${steps} steps\n`);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(existsSync(log)).toBe(false);
    // The last step itself is still one to go on from.
    expect(spawnSync('bash', [script, '--from', String(steps)], { env, encoding: 'utf8' }).status).toBe(0);
  });
});
