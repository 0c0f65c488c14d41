import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planOf, useFakeKubectl } from './plan-helpers.js';

/**
 * A StatefulSet or DaemonSet whose updateStrategy is OnDelete (the default of apps/v1beta1
 * StatefulSets and extensions/v1beta1 DaemonSets, kept by objects made then), started again by the
 * move. kubectl rollout status refuses such an object ("rollout status is only available for
 * RollingUpdate strategy type", kubectl's polymorphichelpers/rollout_status.go), exit 1: the start
 * step stopped there, every run, with the workloads after it left stopped and the reclaim policies
 * never restored. The fake kubectl answers rollout status as kubectl does, and the object's counts
 * (generation|observedGeneration|wanted|ready) from a file the test writes.
 */
const volumes = [{ name: 'logs', persistentVolumeClaim: { claimName: 'logs' } }];
const template = { metadata: { labels: { app: 'a' } }, spec: { containers: [{ name: 'c', image: 'busybox' }], volumes } };
const PV = { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'logs' }, spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteMany'], persistentVolumeReclaimPolicy: 'Retain', claimRef: { namespace: 'shop', name: 'logs' }, flexVolume: { driver: 'acme/twinvol' } } };
const CLAIM = { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'logs', namespace: 'shop' }, spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '1Gi' } }, volumeName: 'logs' } };
const sts = (strategy: string) => ({ apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name: 'db', namespace: 'shop' }, spec: { replicas: 2, serviceName: 'db', selector: { matchLabels: { app: 'a' } }, updateStrategy: { type: strategy }, template } });
const ds = (strategy: string) => ({ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'agent', namespace: 'shop' }, spec: { selector: { matchLabels: { app: 'a' } }, updateStrategy: { type: strategy }, template } });

const KUBECTL = [
  '#!/usr/bin/env bash',
  'echo "$*" >> "$KUBECTL_LOG"',
  'case "$*" in',
  '  "get csidriver csi.twinvol.io -o name") printf csidriver.storage.k8s.io/csi.twinvol.io ;;',
  '  "get pv logs -o jsonpath={.spec.flexVolume.driver}") printf acme/twinvol ;;',
  '  "get pvc -n shop logs -o jsonpath={.spec.volumeName}") printf logs ;;',
  '  "get pv logs -o jsonpath={.spec.persistentVolumeReclaimPolicy}") printf Retain ;;',
  '  "get pvc -n shop logs -o jsonpath={.status.phase}") printf Bound ;;',
  '  "rollout status -n shop "*)',
  '    [[ $(cat "$STATE/${5%%/*}-strategy") == OnDelete ]] || exit 0',
  '    echo "error: rollout status is only available for RollingUpdate strategy type" >&2; exit 1 ;;',
  '  "get -n shop statefulset/db -o jsonpath="*|"get -n shop daemonset/agent -o jsonpath="*) cat "$STATE/${4%%/*}-counts" ;;',
  'esac',
  'exit 0',
  '',
].join('\n');

const world = useFakeKubectl('plan-ondelete', KUBECTL);

let n = 0;
/** The plan of the PV with this workload, and migrate.sh --apply run against the fake kubectl. */
function moved(workload: { kind: string; spec: { updateStrategy: { type: string } } }, counts: string) {
  const dir = join(world.root, `case-${++n}`);
  const state = join(dir, 'state');
  mkdirSync(state, { recursive: true });
  const input = join(dir, 'cluster.json');
  writeFileSync(input, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [PV, CLAIM, workload] }));
  const plan = planOf({ files: [input], out: join(dir, 'plan') });
  expect(plan.exitCode, plan.stderr).toBe(0);
  const kind = workload.kind.toLowerCase();
  writeFileSync(join(state, `${kind}-strategy`), workload.spec.updateStrategy.type);
  writeFileSync(join(state, `${kind}-counts`), counts);
  const log = join(dir, 'kubectl.log');
  writeFileSync(log, '');
  const env = { PATH: `${world.bin}:/usr/bin:/bin`, KUBECTL_LOG: log, STATE: state, MIGRATE_TIMEOUT: '1' };
  const r = spawnSync('bash', [join(dir, 'plan', 'migrate.sh'), '--apply'], { env, encoding: 'utf8' });
  return { ...r, calls: readFileSync(log, 'utf8').trim().split('\n') };
}

describe('migrate.sh starts again a workload whose updateStrategy is OnDelete', () => {
  it.each([
    ['a StatefulSet', () => sts('OnDelete'), 'statefulset/db', '3|3|2|2'],
    ['a DaemonSet', () => ds('OnDelete'), 'daemonset/agent', '4|4|5|5'],
  ])('%s: waits until every pod it wants is ready, not with rollout status, and goes on to the end', (_, workload, resource, counts) => {
    const run = moved(workload(), counts);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.calls.filter((c) => c.startsWith('rollout status'))).toEqual([]);
    expect(run.calls).toContain(`get -n shop ${resource} -o jsonpath={.metadata.generation}|{.status.observedGeneration}|{.spec.replicas}{.status.desiredNumberScheduled}|{.status.readyReplicas}{.status.numberReady}`);
    expect(run.stdout).toContain('\ndone\n');
  });

  it.each([
    ['not all ready', '3|3|2|1', '1 of 2 pods ready, generation 3 seen of 3'],
    ['the change not yet seen by its controller', '4|3|2|2', '2 of 2 pods ready, generation 3 seen of 4'],
  ])('%s: named at the deadline', (_, counts, seen) => {
    const run = moved(sts('OnDelete'), counts);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`check failed after 1 s: statefulset/db in namespace shop: ${seen}, expected every pod it wants ready\n`);
  });

  it('with RollingUpdate, rollout status as before', () => {
    const run = moved(sts('RollingUpdate'), '3|3|2|2');
    expect(run.status, run.stderr).toBe(0);
    expect(run.calls).toContain('rollout status -n shop statefulset/db --timeout=1s');
  });
});
