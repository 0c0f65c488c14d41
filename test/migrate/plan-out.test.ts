import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdmin } from '../helpers/flex-runner.js';
import { isObject, type JsonObject } from '../deploy/load.js';
import { schemaProblems } from '../deploy/schema.js';
import { expectValid, fixture, fixtureObjects, planOf, yamlDocs } from './plan-helpers.js';
import { shellWord } from '../../flex/migrate/script.js';
import { yamlDocuments } from '../../flex/migrate/emit.js';
import { parseAllDocuments } from 'yaml';

/**
 * `twinvol migrate plan --out DIR`, run as the bundled executable: the numbered manifests, the
 * rollback set (which must give back the original objects), STEPS.md, and migrate.sh / rollback.sh,
 * checked with `bash -n` and run in their dry-run mode against a fake kubectl that logs its argv.
 */
const INPUTS = [fixture('cluster.yaml'), fixture('workloads.yaml'), fixture('smb.json')];
const PVS = ['pv-db-0', 'pv-raw', 'media', 'files', 'archive', 'legacy-iscsi', 'reports-smb'];
const CLAIMS: Record<string, [string, string]> = {
  'pv-db-0': ['shop', 'data-db-0'],
  'pv-raw': ['shop', 'raw-scratch'],
  media: ['shop', 'media'],
  files: ['shop', 'files'],
  archive: ['shop', 'archive'],
  'legacy-iscsi': ['shop', 'legacy'],
  'reports-smb': ['finance', 'reports'],
};
const FLEX_DRIVERS: Record<string, string> = {
  'pv-db-0': 'acme/twinvol',
  'pv-raw': 'acme/twinvol',
  media: 'k8s/nfs',
  files: 'fstab/cifs',
  archive: 'azure/blobfuse',
  'legacy-iscsi': 'acme/iscsi',
  'reports-smb': 'microsoft.com/smb',
};

let root: string;
let out: string;
let cli: { exitCode: number; stdout: string; stderr: string };

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'twinvol-plan-'));
  out = join(root, 'plan');
  cli = await runAdmin({}, ['migrate', 'plan', ...INPUTS, '--out', out]);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const read = (rel: string) => readFileSync(join(out, rel), 'utf8');

/** What the rollback set must hold: the original object, minus what the API server owns. */
function applicable(doc: JsonObject): JsonObject {
  const copy = structuredClone(doc);
  delete copy.status;
  const meta = copy.metadata as JsonObject;
  for (const key of ['uid', 'resourceVersion', 'creationTimestamp']) delete meta[key];
  if (isObject(meta.annotations)) {
    for (const key of Object.keys(meta.annotations)) if (key.startsWith('pv.kubernetes.io/')) delete meta.annotations[key];
    if (!Object.keys(meta.annotations).length) delete meta.annotations;
  }
  const ref = (copy.spec as JsonObject).claimRef;
  if (copy.kind === 'PersistentVolume' && isObject(ref)) {
    delete ref.uid;
    delete ref.resourceVersion;
  }
  return copy;
}

describe('migrate plan --out (the bundled executable)', () => {
  it('writes numbered manifests, the rollback set, the pods it re-creates, STEPS.md and two executable scripts', () => {
    expect(cli.stdout).toBe('');
    expect(cli.exitCode).toBe(1);
    expect(cli.stderr).toContain(`wrote ${out}: 18 files (7 manifests, STEPS.md, migrate.sh, rollback.sh)`);
    const names = PVS.map((pv, i) => `0${i + 1}-${pv}.yaml`);
    expect(readdirSync(join(out, 'manifests'))).toEqual(names);
    expect(readdirSync(join(out, 'rollback'))).toEqual(names);
    expect(readdirSync(join(out, 'pods'))).toEqual(['shop_report.yaml']);
    for (const script of ['migrate.sh', 'rollback.sh']) expect(statSync(join(out, script)).mode & 0o777).toBe(0o755);
  });

  it('manifests hold what stdout would: each PV with its claim, valid against the schemas', () => {
    const printed = planOf({ files: INPUTS }).docs;
    const written = PVS.flatMap((pv, i) => yamlDocs(read(`manifests/0${i + 1}-${pv}.yaml`)));
    expect(written).toEqual(printed);
    expectValid(written);
  });

  it('the rollback set restores the originals: the same objects, cleaned of status, uids and server fields', () => {
    const originals = [...fixtureObjects('cluster.yaml'), ...fixtureObjects('smb.json')];
    for (const [i, pv] of PVS.entries()) {
      const docs = yamlDocs(read(`rollback/0${i + 1}-${pv}.yaml`));
      const [ns, claim] = CLAIMS[pv] as [string, string];
      const want = originals.filter((o) => (o.kind === 'PersistentVolume' && (o.metadata as JsonObject).name === pv) || (o.kind === 'PersistentVolumeClaim' && (o.metadata as JsonObject).name === claim && (o.metadata as JsonObject).namespace === ns));
      expect(want).toHaveLength(2);
      // A claim without a class gets its PV's (or ""), so that admission gives it no default class.
      const pvClass = ((want.find((o) => o.kind === 'PersistentVolume')?.spec as JsonObject).storageClassName as string | undefined) ?? '';
      const classed = (o: JsonObject) => (o.kind === 'PersistentVolumeClaim' && (o.spec as JsonObject).storageClassName === undefined ? { ...o, spec: { ...(o.spec as JsonObject), storageClassName: pvClass } } : o);
      expect(docs).toEqual(want.map(applicable).map(classed));
      expect(docs.filter((d) => d.kind === 'PersistentVolumeClaim').map((d) => typeof (d.spec as JsonObject).storageClassName)).toEqual(['string']);
      expectValid(docs);
    }
    const pod = fixtureObjects('workloads.yaml').find((o) => o.kind === 'Pod' && (o.metadata as JsonObject).name === 'report') as JsonObject;
    expect(yamlDocs(read('pods/shop_report.yaml'))).toEqual([applicable(pod)]);
  });

  it('the schema check sees a field the API does not know (the validation above can fail)', () => {
    const pv = yamlDocs(read('manifests/01-pv-db-0.yaml'))[0] as JsonObject;
    (pv.spec as JsonObject).csi = { ...((pv.spec as JsonObject).csi as JsonObject), volumeAtributes: { a: 'b' } };
    expect(schemaProblems(pv)).toEqual(['PersistentVolume/pv-db-0: unknown field spec.csi.volumeAtributes']);
  });

  it('STEPS.md lists the moves, what was not moved, the inline replacements and both sets of steps', () => {
    const steps = read('STEPS.md');
    for (const pv of PVS) expect(steps).toContain(`| ${pv} | ${CLAIMS[pv]?.join('/')} | ${FLEX_DRIVERS[pv]} |`);
    expect(steps).toContain('## Not moved (1)\n\n- Pod shop/report: spec.volumes[cache].flexVolume:');
    expect(steps).toContain('- Deployment shop/web, volume `static` (k8s/nfs)');
    const titles = [...steps.matchAll(/^\d+\. (.*)$/gm)].map((m) => m[1]);
    const back = [
      'Check that the cluster is as planned: each PV still has its driver and claim, and each CSI driver is registered',
      'Keep the data whatever happens: set the reclaim policy of the PVs to Retain',
      'Stop the workloads that use the claims, and wait until no pod uses them',
      'Delete the claims (the PVs are Retain: the data stays)',
      'Delete the old PVs (Retain: only the API objects go)',
      'Apply the new PVs and claims, and wait until each claim is Bound to its PV',
      'Start the workloads again, and wait until they are ready',
    ];
    // rollback.sh: the same way back, without the last step (the originals carry their own reclaim policy).
    expect(titles).toEqual([...back, 'Restore the original reclaim policy on the new PVs', ...back]);
  });

  it('refuses a directory that is not empty, and writes nothing', async () => {
    const r = await runAdmin({}, ['migrate', 'plan', ...INPUTS, '--out', out]);
    expect(r).toEqual({ exitCode: 2, stdout: '', stderr: `twinvol migrate plan: --out ${out}: the directory exists and is not empty (see: twinvol migrate plan --help)\n` });
  });

  it('refuses a path that is a file, in one line', () => {
    const r = planOf({ files: INPUTS, out: join(out, 'STEPS.md', 'plan') });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toBe(`twinvol migrate plan: --out ${join(out, 'STEPS.md', 'plan')}: cannot be written (not a directory) (see: twinvol migrate plan --help)\n`);
  });
});

/**
 * A kubectl that logs each argv as one line and answers reads from a table (argv joined by spaces).
 * A PV's reclaim policy is the one the last `patch pv` of the log set (else the table's): enough of
 * a cluster for --apply to run through its checks.
 */
function fakeKubectl(dir: string, answers: Record<string, string>): { log: string; env: Record<string, string> } {
  const bin = join(dir, 'bin');
  execFileSync('mkdir', ['-p', bin]);
  const log = join(dir, 'kubectl.log');
  const table = join(dir, 'answers');
  writeFileSync(table, Object.entries(answers).map(([argv, answer]) => `${argv}\t${answer}\n`).join(''));
  writeFileSync(
    join(bin, 'kubectl'),
    [
      '#!/usr/bin/env bash',
      'echo "$*" >> "$KUBECTL_LOG"',
      'if [[ "$1 $2 $4 $5" == "get pv -o jsonpath={.spec.persistentVolumeReclaimPolicy}" ]]; then',
      '  set=$(grep -oE "^patch pv $3 .*persistentVolumeReclaimPolicy\\":\\"[A-Za-z]+" "$KUBECTL_LOG" | tail -n 1 | grep -oE "[A-Za-z]+$")',
      '  if [[ -n $set ]]; then printf %s "$set"; exit 0; fi',
      'fi',
      'while IFS=$\'\\t\' read -r argv answer; do',
      // An answer "!message" is a failure: the message on stderr, exit 1.
      '  if [[ $argv == "$*" && $answer == !* ]]; then echo "${answer:1}" >&2; exit 1; fi',
      '  if [[ $argv == "$*" ]]; then printf %s "$answer"; exit 0; fi',
      'done < "$KUBECTL_ANSWERS"',
      'exit 0',
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'kubectl'), 0o755);
  writeFileSync(log, '');
  return { log, env: { PATH: `${bin}:/usr/bin:/bin`, KUBECTL_LOG: log, KUBECTL_ANSWERS: table } };
}

/** How migrate.sh reads a re-created pod's state (emit.ts settle_pod). */
const READY = 'jsonpath={.status.phase}/{.status.conditions[?(@.type=="Ready")].status}';

/** The cluster as planned: each PV on its FlexVolume driver, each claim bound to it, twinvol-csi registered. */
function plannedCluster(): Record<string, string> {
  const answers: Record<string, string> = { 'get csidriver csi.twinvol.io -o name': 'csidriver.storage.k8s.io/csi.twinvol.io' };
  for (const pv of PVS) {
    answers[`get pv ${pv} -o jsonpath={.spec.flexVolume.driver}`] = FLEX_DRIVERS[pv] ?? '';
    const [ns, claim] = CLAIMS[pv] as [string, string];
    answers[`get pvc -n ${ns} ${claim} -o jsonpath={.spec.volumeName}`] = pv;
  }
  return answers;
}

describe('migrate.sh', () => {
  it('is valid bash (bash -n), and so is rollback.sh', () => {
    for (const script of ['migrate.sh', 'rollback.sh']) expect(spawnSync('bash', ['-n', join(out, script)], { encoding: 'utf8' })).toMatchObject({ status: 0, stderr: '' });
  });

  it('in its dry run checks the cluster first, then sends every change with --dry-run, in the order of the steps', () => {
    const k = fakeKubectl(join(root, 'dry'), plannedCluster());
    const r = spawnSync('bash', [join(out, 'migrate.sh')], { env: k.env, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('done (dry run: nothing changed)');
    const calls = readFileSync(k.log, 'utf8').trim().split('\n');
    const expected = [
      'get csidriver csi.twinvol.io -o name',
      ...PVS.map((pv) => `get pv ${pv} -o jsonpath={.spec.flexVolume.driver}`),
      ...PVS.map((pv) => `get pvc -n ${CLAIMS[pv]?.[0]} ${CLAIMS[pv]?.[1]} -o jsonpath={.spec.volumeName}`),
      ...PVS.map((pv) => `patch pv ${pv} --type merge -p {"spec":{"persistentVolumeReclaimPolicy":"Retain"}} --dry-run=server`),
      'scale -n shop statefulset/db --replicas=0 --dry-run=server',
      'scale -n shop deployment/legacy-app --replicas=0 --dry-run=server',
      'scale -n shop deployment/web --replicas=0 --dry-run=server',
      'patch -n shop daemonset/log-shipper --type merge -p {"spec":{"template":{"spec":{"nodeSelector":{"migrate.twinvol.io/stopped":"true"}}}}} --dry-run=server',
      'delete -n shop pod/report --wait=false --ignore-not-found --dry-run=server',
      'patch -n shop cronjob/archiver --type merge -p {"spec":{"suspend":true}} --dry-run=server',
      ...PVS.map((pv) => `delete pvc -n ${CLAIMS[pv]?.[0]} ${CLAIMS[pv]?.[1]} --wait=false --ignore-not-found --dry-run=server`),
      ...PVS.map((pv) => `delete pv ${pv} --wait=false --ignore-not-found --dry-run=server`),
      ...PVS.map((pv, i) => `apply -f manifests/0${i + 1}-${pv}.yaml --dry-run=client`),
      'scale -n shop statefulset/db --replicas=1 --dry-run=server',
      'scale -n shop deployment/legacy-app --replicas=1 --dry-run=server',
      'scale -n shop deployment/web --replicas=3 --dry-run=server',
      'patch -n shop daemonset/log-shipper --type merge -p {"spec":{"template":{"spec":{"nodeSelector":{"migrate.twinvol.io/stopped":null}}}}} --dry-run=server',
      'apply -f pods/shop_report.yaml --dry-run=client',
      'patch -n shop cronjob/archiver --type merge -p {"spec":{"suspend":false}} --dry-run=server',
      'patch pv pv-db-0 --type merge -p {"spec":{"persistentVolumeReclaimPolicy":"Delete"}} --dry-run=server',
      'patch pv archive --type merge -p {"spec":{"persistentVolumeReclaimPolicy":"Delete"}} --dry-run=server',
    ];
    expect(calls).toEqual(expected);
  });

  it('stops at the first check that fails, before any change', () => {
    const answers = plannedCluster();
    // Someone moved this PV already: its driver is not the one planned.
    answers['get pv files -o jsonpath={.spec.flexVolume.driver}'] = '';
    const k = fakeKubectl(join(root, 'moved'), answers);
    const r = spawnSync('bash', [join(out, 'migrate.sh'), '--apply'], { env: k.env, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe("check failed: kubectl get pv files -o jsonpath={.spec.flexVolume.driver}: got '', expected 'fstab/cifs'\n");
    const calls = readFileSync(k.log, 'utf8').trim().split('\n');
    expect(calls.at(-1)).toBe('get pv files -o jsonpath={.spec.flexVolume.driver}');
    expect(calls.filter((c) => !c.startsWith('get '))).toEqual([]);
  });

  it('a check whose kubectl fails says so after kubectl\'s own words, and changes nothing', () => {
    const answers = plannedCluster();
    answers['get pv files -o jsonpath={.spec.flexVolume.driver}'] = '!Error from server (NotFound): persistentvolumes "files" not found';
    const k = fakeKubectl(join(root, 'failing'), answers);
    const r = spawnSync('bash', [join(out, 'migrate.sh'), '--apply'], { env: k.env, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('Error from server (NotFound): persistentvolumes "files" not found\ncheck failed: kubectl get pv files -o jsonpath={.spec.flexVolume.driver}: the command failed (exit 1), expected \'fstab/cifs\'\n');
    expect(readFileSync(k.log, 'utf8').trim().split('\n').filter((c) => !c.startsWith('get '))).toEqual([]);
  });

  it('with --apply waits for each change to show before the next step: Retain before the stop, Bound before the start', () => {
    const answers = plannedCluster();
    for (const pv of PVS) {
      const [ns, claim] = CLAIMS[pv] as [string, string];
      answers[`get pvc -n ${ns} ${claim} -o jsonpath={.status.phase}`] = 'Bound';
    }
    answers[`get pod -n shop report -o ${READY}`] = 'Running/True';
    const k = fakeKubectl(join(root, 'apply'), answers);
    const r = spawnSync('bash', [join(out, 'migrate.sh'), '--apply'], { env: { ...k.env, MIGRATE_TIMEOUT: '5' }, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const calls = readFileSync(k.log, 'utf8').trim().split('\n');
    expect(calls.filter((c) => c.includes('--dry-run'))).toEqual([]);
    // Each change is followed by the read that proves it, before anything else.
    const after = (call: string) => calls[calls.indexOf(call) + 1];
    expect(after('patch pv media --type merge -p {"spec":{"persistentVolumeReclaimPolicy":"Retain"}}')).toBe('get pv media -o jsonpath={.spec.persistentVolumeReclaimPolicy}');
    expect(after('delete pvc -n shop media --wait=false --ignore-not-found')).toBe('get pvc -n shop media --ignore-not-found -o name');
    expect(after('apply -f manifests/03-media.yaml')).toBe('get pvc -n shop media -o jsonpath={.status.phase}');
    expect(after('scale -n shop deployment/web --replicas=3')).toBe('rollout status -n shop deployment/web --timeout=5s');
    expect(after('apply -f pods/shop_report.yaml')).toBe(`get pod -n shop report -o ${READY}`);
    expect(after('patch pv archive --type merge -p {"spec":{"persistentVolumeReclaimPolicy":"Delete"}}')).toBe('get pv archive -o jsonpath={.spec.persistentVolumeReclaimPolicy}');
    // No pod may use a claim when it is deleted: every claim was checked after the last stop.
    const lastStop = calls.indexOf('patch -n shop cronjob/archiver --type merge -p {"spec":{"suspend":true}}');
    const firstDelete = calls.indexOf('delete pvc -n shop data-db-0 --wait=false --ignore-not-found');
    expect(calls.slice(lastStop + 1, firstDelete).filter((c) => c.startsWith('get pods -n '))).toHaveLength(PVS.length);
  });

  it('with --apply stops when a claim never binds, before any workload starts again', () => {
    // One PV (the web Deployment's claim) keeps this run short.
    const small = join(root, 'small');
    const one = join(root, 'one.yaml');
    const objects = [...fixtureObjects('cluster.yaml'), ...fixtureObjects('workloads.yaml')];
    const keep = (o: JsonObject) => ['media', 'web'].includes(String((o.metadata as JsonObject).name)) && ['PersistentVolume', 'PersistentVolumeClaim', 'Deployment'].includes(String(o.kind));
    writeFileSync(one, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects.filter(keep) }));
    expect(planOf({ files: [one], out: small }).exitCode).toBe(0);
    const k = fakeKubectl(join(root, 'unbound'), { 'get csidriver csi.twinvol.io -o name': 'csidriver.storage.k8s.io/csi.twinvol.io', 'get pv media -o jsonpath={.spec.flexVolume.driver}': 'k8s/nfs', 'get pvc -n shop media -o jsonpath={.spec.volumeName}': 'media' });
    const r = spawnSync('bash', [join(small, 'migrate.sh'), '--apply'], { env: { ...k.env, MIGRATE_TIMEOUT: '1' }, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      `check failed after 1 s: kubectl get pvc -n shop media -o jsonpath={.status.phase}: got '', expected 'Bound'\nstopped in step 6; once its cause is mended, go on with: ${join(small, 'migrate.sh')} --apply --from 6\n`,
    );
    const calls = readFileSync(k.log, 'utf8').trim().split('\n');
    // After the apply, only the claim's phase was read, again and again, until the deadline.
    const applied = calls.indexOf('apply -f manifests/01-media.yaml');
    expect(new Set(calls.slice(applied + 1))).toEqual(new Set(['get pvc -n shop media -o jsonpath={.status.phase}']));
    expect(calls.filter((c) => c.startsWith('apply -f'))).toEqual(['apply -f manifests/01-media.yaml']);
    // Gone on with as it says, once the claim binds: the first step's checks, which held only before
    // any change (the old PV and claim are gone now), and the steps done are skipped.
    writeFileSync(join(root, 'unbound', 'answers'), 'get pvc -n shop media -o jsonpath={.status.phase}\tBound\n');
    writeFileSync(k.log, '');
    const resumed = spawnSync('bash', [join(small, 'migrate.sh'), '--apply', '--from', '6'], { env: { ...k.env, MIGRATE_TIMEOUT: '1' }, encoding: 'utf8' });
    expect(resumed.stderr).toBe('');
    expect(resumed.status).toBe(0);
    expect(resumed.stdout).toContain('== 1. Check that the cluster is as planned');
    expect(resumed.stdout).toMatch(/== 5\. [^\n]* \(skipped: --from\)\n/);
    const again = readFileSync(k.log, 'utf8').trim().split('\n');
    expect(again[0]).toBe('apply -f manifests/01-media.yaml');
    expect(again.filter((c) => c.startsWith('delete') || c.startsWith('patch pv media --type merge -p {"spec":{"persistentVolumeReclaimPolicy":"Retain"}}'))).toEqual([]);
    expect(calls.filter((c) => c.startsWith('scale'))).toEqual(['scale -n shop deployment/web --replicas=0']);
  });

  it('when every PV was skipped, says so and runs no kubectl at all', () => {
    const lonely = join(root, 'lonely.yaml');
    writeFileSync(lonely, 'apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: x}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], claimRef: {namespace: a, name: gone}, flexVolume: {driver: a/b}}\n');
    const empty = join(root, 'empty');
    expect(planOf({ files: [lonely], out: empty }).exitCode).toBe(1);
    expect(readFileSync(join(empty, 'STEPS.md'), 'utf8')).toContain('## Steps (./migrate.sh)\n\nNothing to move: every FlexVolume PV was skipped (see above).');
    const k = fakeKubectl(join(root, 'nothing'), {});
    const r = spawnSync('bash', [join(empty, 'migrate.sh'), '--apply'], { env: k.env, encoding: 'utf8' });
    expect(r).toMatchObject({ status: 0, stdout: 'nothing to move: every FlexVolume PV was skipped (STEPS.md says why)\n\ndone\n' });
    expect(readFileSync(k.log, 'utf8')).toBe('');
  });

  it('refuses an unknown argument', () => {
    const r = spawnSync('bash', [join(out, 'migrate.sh'), '--aply'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('usage:');
  });
});

describe('the scripts quote every word', () => {
  it.each([['web${TIMEOUT}$(touch PWNED)'], ["it's"], ['a b\nc'], ['`id`'], ['$HOME'], ['--timeout=${TIMEOUT}sx'], ['plain-word']])('%j reaches kubectl as it is', (word) => {
    const dir = mkdtempSync(join(tmpdir(), 'twinvol-shell-word-'));
    try {
      const out = execFileSync('bash', ['-c', `printf '%s' ${shellWord(word)}`], { cwd: dir, env: { PATH: '/usr/bin:/bin', TIMEOUT: '300' }, encoding: 'utf8' });
      expect(out).toBe(word);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('only the deadline word itself is expanded, from TIMEOUT', () => {
    expect(execFileSync('bash', ['-c', `printf '%s' ${shellWord('--timeout=${TIMEOUT}s')}`], { env: { PATH: '/usr/bin:/bin', TIMEOUT: '45' }, encoding: 'utf8' })).toBe('--timeout=45s');
  });
});

describe('the manifests read back as written by a YAML 1.1 reader, as kubectl reads them', () => {
  it('strings that YAML 1.1 or 1.2 would take for booleans, numbers, null or times stay strings', () => {
    const ambiguous = ['yes', 'no', 'on', 'off', 'y', 'N', 'YES', 'On', '0b101', '0o17', '017', '1_000', '1e3', '12:30', '~', 'null', '.inf', '2001-12-14', '', 'true'];
    const doc: JsonObject = { metadata: { labels: Object.fromEntries(ambiguous.map((s, i) => [`k${i}`, s])) }, spec: { csi: { volumeAttributes: { readonly: 'no', server: 'on' } } }, on: 'y' };
    const text = yamlDocuments([doc]);
    for (const version of ['1.1', '1.2'] as const) expect(parseAllDocuments(text, { version }).map((d) => d.toJS())).toEqual([doc]);
  });
});

describe('migrate plan --out --prefer vendor: a copied Secret', () => {
  it('is written where only its owner can read it, from the moment the file exists; the rest stay 0644', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'twinvol-plan-secret-'));
    try {
      const r = await runAdmin({}, ['migrate', 'plan', ...INPUTS, '--prefer', 'vendor', '--out', join(dir, 'plan')]);
      expect(r.stderr).toContain('wrote');
      const manifests = join(dir, 'plan', 'manifests');
      const modes = Object.fromEntries(readdirSync(manifests).map((f) => [f, { secret: yamlDocs(readFileSync(join(manifests, f), 'utf8')).some((d) => d.kind === 'Secret'), mode: statSync(join(manifests, f)).mode & 0o777 }]));
      const withSecret = Object.values(modes).filter((m) => m.secret);
      expect(withSecret.length).toBeGreaterThan(0);
      for (const m of Object.values(modes)) expect(m.mode).toBe(m.secret ? 0o600 : 0o644);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rollback.sh deletes at its end the copy this plan makes, only while it carries the label; migrate.sh never deletes a Secret', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'twinvol-plan-secret-'));
    try {
      expect((await runAdmin({}, ['migrate', 'plan', ...INPUTS, '--prefer', 'vendor', '--out', join(dir, 'plan')])).stderr).toContain('wrote');
      const rollback = readFileSync(join(dir, 'plan', 'rollback.sh'), 'utf8');
      const deletes = rollback.split('\n').filter((l) => l.includes(' secret '));
      expect(deletes).toHaveLength(1);
      expect(deletes[0]).toMatch(/delete secret -n shop -l '?migrate\.twinvol\.io\/from-secret=blob-creds'? --field-selector '?metadata\.name=blob-creds-csi'?/);
      expect(readFileSync(join(dir, 'plan', 'migrate.sh'), 'utf8')).not.toMatch(/delete secret/);
      expect(readFileSync(join(dir, 'plan', 'STEPS.md'), 'utf8')).toContain('Delete the Secret copies the move made');
      expect(spawnSync('bash', ['-n', join(dir, 'plan', 'rollback.sh')], { encoding: 'utf8' })).toMatchObject({ status: 0, stderr: '' });
      // A copy an earlier plan made (in the input, with the label) may serve PVs moved then: it stays.
      const earlier = join(dir, 'earlier-copy.json');
      writeFileSync(earlier, JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'blob-creds-csi', namespace: 'shop', labels: { 'migrate.twinvol.io/from-secret': 'blob-creds' } }, data: { other: 'eA==' } }));
      expect((await runAdmin({}, ['migrate', 'plan', ...INPUTS, earlier, '--prefer', 'vendor', '--out', join(dir, 'again')])).stderr).toContain('wrote');
      expect(readFileSync(join(dir, 'again', 'rollback.sh'), 'utf8')).not.toMatch(/delete secret/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
