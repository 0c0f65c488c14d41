import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planOf } from './plan-helpers.js';

/**
 * migrate.sh and rollback.sh go on from a step with `--from N` once a cause is mended, so each step
 * must be one that can be made again. The DaemonSet a move stops is held here as a file, and every
 * patch the scripts send it is applied to that file by the real kubectl (`kubectl patch --local`),
 * whose patch code is the API server's: a patch the cluster would refuse fails here the same way.
 */
const KUBECTL = '/usr/bin/kubectl';
const haveKubectl = spawnSync(KUBECTL, ['version', '--client'], { encoding: 'utf8' }).status === 0;

const OBJECTS = [
  { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'logs' }, spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteMany'], persistentVolumeReclaimPolicy: 'Retain', claimRef: { namespace: 'shop', name: 'logs' }, flexVolume: { driver: 'acme/twinvol' } } },
  { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'logs', namespace: 'shop' }, spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '1Gi' } }, volumeName: 'logs' } },
  {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'shipper', namespace: 'shop' },
    spec: {
      selector: { matchLabels: { app: 'shipper' } },
      template: { metadata: { labels: { app: 'shipper' } }, spec: { nodeSelector: { 'kubernetes.io/os': 'linux' }, containers: [{ name: 'c', image: 'busybox' }], volumes: [{ name: 'logs', persistentVolumeClaim: { claimName: 'logs' } }] } },
    },
  },
];

/** The DaemonSet's pod template nodeSelector, as the "cluster" holds it now. */
const selectorOf = (ds: string) => (JSON.parse(readFileSync(ds, 'utf8')) as { spec: { template: { spec: { nodeSelector?: Record<string, string> } } } }).spec.template.spec.nodeSelector;

let root: string;
let plan: string;
let ds: string;
let env: Record<string, string>;
let log: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'twinvol-plan-rerun-'));
  plan = join(root, 'plan');
  const input = join(root, 'cluster.json');
  writeFileSync(input, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: OBJECTS }));
  expect(planOf({ files: [input], out: plan }).exitCode).toBe(0);
  ds = join(root, 'daemonset.json');
  writeFileSync(ds, JSON.stringify(OBJECTS[2]));
  const bin = join(root, 'bin');
  mkdirSync(bin);
  log = join(root, 'kubectl.log');
  writeFileSync(log, '');
  // Reads answer as the cluster would once each change is made; a DaemonSet patch goes to the file.
  writeFileSync(
    join(bin, 'kubectl'),
    [
      '#!/usr/bin/env bash',
      'echo "$*" >> "$KUBECTL_LOG"',
      'case "$*" in',
      '  "get csidriver csi.twinvol.io -o name") printf csidriver.storage.k8s.io/csi.twinvol.io ;;',
      '  "get pv logs -o jsonpath={.spec.flexVolume.driver}") printf acme/twinvol ;;',
      '  "get pv logs -o jsonpath={.spec.csi.driver}") printf csi.twinvol.io ;;',
      '  "get pvc -n shop logs -o jsonpath={.spec.volumeName}") printf logs ;;',
      '  "get pv logs -o jsonpath={.spec.persistentVolumeReclaimPolicy}") printf Retain ;;',
      '  "get pvc -n shop logs -o jsonpath={.status.phase}") printf Bound ;;',
      '  "get pvc -n shop logs --ignore-not-found -o name")',
      '    if [[ -n $READ_FAIL ]]; then echo "$READ_FAIL" >&2; exit 1; fi ;;',
      // The pods of the namespace: a running pod of the DaemonSet names the claim until it is stopped.
      '  "get pods -n shop "*)',
      '    if [[ -n $PODS_FAIL ]]; then echo "$PODS_FAIL" >&2; exit 1; fi',
      '    if [[ -n $PODS_STUCK ]] || ! grep -q stopped "$DS_FILE"; then printf "web-1|Running||web \\nshipper-1|Running||logs \\n"; fi ;;',
      '  "patch -n shop daemonset/shipper "*)',
      '    shift 4',
      `    out=$(${KUBECTL} patch --local -f "$DS_FILE" "$@" -o json) || exit 1`,
      '    printf "%s" "$out" > "$DS_FILE" ;;',
      'esac',
      'exit 0',
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'kubectl'), 0o755);
  env = { PATH: `${bin}:/usr/bin:/bin`, KUBECTL_LOG: log, DS_FILE: ds, MIGRATE_TIMEOUT: '5' };
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The number of a script's step whose title starts so. */
function stepOf(script: string, title: string): string {
  const m = readFileSync(join(plan, script), 'utf8').match(new RegExp(`^step (\\d+) '${title}`, 'm'));
  expect(m, `${script}: step "${title}"`).not.toBeNull();
  return m?.[1] ?? '';
}

const run = (script: string, ...args: string[]) => spawnSync('bash', [join(plan, script), '--apply', ...args], { env, encoding: 'utf8' });
const runWith = (extra: Record<string, string>, script: string) => spawnSync('bash', [join(plan, script), '--apply'], { env: { ...env, ...extra }, encoding: 'utf8' });

describe.skipIf(!haveKubectl)('a stopped DaemonSet started again', () => {
  it.each(['migrate.sh', 'rollback.sh'])('%s: the start step can be made again (--from), and leaves the DaemonSet as it was', (script) => {
    writeFileSync(ds, JSON.stringify(OBJECTS[2]));
    const first = run(script);
    expect(first.stderr).toBe('');
    expect(first.status).toBe(0);
    expect(selectorOf(ds)).toEqual({ 'kubernetes.io/os': 'linux' });
    // The start step again, as `--from N` runs it after a later wait (a rollout status) timed out.
    const start = stepOf(script, 'Start the workloads again');
    const again = run(script, '--from', start);
    expect(again.stderr).toBe('');
    expect(again.status).toBe(0);
    expect(selectorOf(ds)).toEqual({ 'kubernetes.io/os': 'linux' });
  });
});

describe('the wait until no pod uses a claim', () => {
  it('is not passed by a pod list that could not be read: no claim is deleted', () => {
    writeFileSync(ds, JSON.stringify(OBJECTS[2]));
    writeFileSync(log, '');
    const r = runWith({ PODS_FAIL: 'Error from server (Forbidden): pods is forbidden', MIGRATE_TIMEOUT: '1' }, 'migrate.sh');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('check failed after 1 s: claim logs in namespace shop: the pod list could not be read (exit 1), expected no pod to name it');
    expect(r.stderr).toContain('stopped in step 3');
    const calls = readFileSync(log, 'utf8').trim().split('\n');
    expect(calls.filter((c) => c.startsWith('delete '))).toEqual([]);
  });

  it('counts the pods that name the claim, until they are gone', () => {
    writeFileSync(ds, JSON.stringify(OBJECTS[2]));
    writeFileSync(log, '');
    const r = runWith({ PODS_STUCK: '1', MIGRATE_TIMEOUT: '1' }, 'migrate.sh');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('check failed after 1 s: claim logs in namespace shop: named by shipper-1 Running, expected no pod to name it');
    expect(readFileSync(log, 'utf8')).not.toMatch(/^delete /m);
  });
});

describe('a wait for an object to be gone', () => {
  it('is not passed by a read that failed (it printed nothing, as a gone object does): the old PV stays', () => {
    writeFileSync(ds, JSON.stringify(OBJECTS[2]));
    writeFileSync(log, '');
    const r = runWith({ READ_FAIL: 'Unable to connect to the server: dial tcp 10.0.0.1:6443: i/o timeout', MIGRATE_TIMEOUT: '1' }, 'migrate.sh');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('check failed after 1 s: kubectl get pvc -n shop logs --ignore-not-found -o name: the command failed');
    expect(r.stderr).toContain('stopped in step 4');
    expect(readFileSync(log, 'utf8')).not.toMatch(/^delete pv /m);
  });
});
