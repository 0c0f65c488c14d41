import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runAdmin } from '../helpers/flex-runner.js';
import { fixture, linesOf, planOf } from './plan-helpers.js';
import type { JsonObject } from '../deploy/load.js';

/**
 * Bad input to `twinvol migrate plan`: one clear line naming the object (or document) and the field,
 * never a stack trace. An input that cannot be read as Kubernetes objects plans nothing (exit 2); a
 * PV that cannot move is skipped with its reason while the rest is planned (exit 1).
 */
const bad = (name: string) => fixture(`bad/${name}`);
const USAGE = ' (see: twinvol migrate plan --help)\n';
const scratch = mkdtempSync(join(tmpdir(), 'twinvol-plan-bad-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('input that is not Kubernetes objects: exit 2, one line, nothing planned', () => {
  it.each([
    ['not-yaml.yaml', 'document 1: not YAML or JSON (line 3, column 1): Flow sequence in block collection must be sufficiently indented and end with a ]'],
    ['broken.json', 'document 1: not YAML or JSON (line 2, column 1): Flow map must end with a }'],
    ['not-an-object.yaml', 'document 1: not a Kubernetes object (a list, not a mapping with kind and metadata)'],
    ['no-kind.yaml', 'document 1: not a Kubernetes object: kind is missing'],
    ['no-name.yaml', 'document 1: PersistentVolume: metadata.name is missing'],
    ['missing.yaml', ': cannot be read (no such file)'],
  ])('%s', (file, message) => {
    const r = planOf({ files: [bad(file)] });
    expect(r).toMatchObject({ exitCode: 2, stdout: '' });
    expect(r.stderr).toBe(`twinvol migrate plan: ${bad(file)}${message.startsWith(':') ? '' : ' '}${message}${USAGE}`);
  });

  it('an empty file name (an unset variable, quoted) is named as such', () => {
    expect(planOf({ files: [''] })).toMatchObject({ exitCode: 2, stdout: '', stderr: `twinvol migrate plan: an input file is named by an empty word: name a file, or - for stdin${USAGE}` });
  });

  it('an alias to no anchor (the parser throws it late, from toJS) is named like any other YAML error', () => {
    expect(planOf({ files: ['-'] }, '*!')).toMatchObject({ exitCode: 2, stderr: `twinvol migrate plan: stdin document 1: not YAML or JSON: Unresolved alias (the anchor must be set before the alias): !${USAGE}` });
    const aliases = `a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n`;
    expect(planOf({ files: ['-'] }, aliases)).toMatchObject({ exitCode: 2, stderr: `twinvol migrate plan: stdin document 1: not YAML or JSON: Excessive alias count indicates a resource exhaustion attack${USAGE}` });
  });

  it('an input with no PersistentVolume says what it found instead', () => {
    const r = planOf({ files: [bad('no-pv.yaml')] });
    expect(r).toEqual({
      exitCode: 2,
      stdout: '',
      stderr: `twinvol migrate plan: no PersistentVolume in ${bad('no-pv.yaml')} (found Deployment shop/web): give the output of kubectl get pv,pvc,pods,deploy,sts,ds,cronjobs,secrets -A -o yaml${USAGE}`,
      docs: [],
    });
  });

  it.each([
    // A name once went into migrate.sh inside double quotes, and its command substitution ran.
    ['Deployment', 'web${TIMEOUT}$(touch PWNED)', 'shop', 'metadata.name is not a Kubernetes object name'],
    ['PersistentVolume', 'pv one', '', 'metadata.name is not a Kubernetes object name'],
    ['PersistentVolumeClaim', 'data', "it's", 'metadata.namespace "it\'s" is not a namespace name'],
    ['Secret', 'Creds', 'shop', 'metadata.name is not a Kubernetes object name'],
  ])('a %s named %j in %j is not an object the API server could have printed', (kind, name, namespace, message) => {
    const doc = JSON.stringify({ apiVersion: 'v1', kind, metadata: { name, ...(namespace ? { namespace } : {}) } });
    const r = planOf({ files: ['-'] }, doc);
    expect(r).toMatchObject({ exitCode: 2, stdout: '' });
    expect(r.stderr).toContain(message);
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('other kinds keep names the plan never writes (RBAC\'s system:...)', () => {
    const docs = [
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'system:controller:x' } },
      { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'pv-a' }, spec: { flexVolume: { driver: 'twinvol/twinvol', options: { volumeId: 'a' } } } },
    ];
    expect(planOf({ files: ['-'] }, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: docs })).stderr).not.toContain('system:controller:x');
  });

  it('a bad document in a List is named by its index', () => {
    const list = join(scratch, 'list.yaml');
    writeFileSync(list, 'apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata: {name: a}\n- 42\n');
    expect(planOf({ files: [list] }).stderr).toBe(`twinvol migrate plan: ${list} document 1 items[1]: not a Kubernetes object (a number, not a mapping with kind and metadata)${USAGE}`);
  });

  it('a mapping file is checked whole, the field named', () => {
    const r = planOf({ files: [fixture('smb.json')], mappings: [bad('mapping-typo.yaml')] });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toBe(`twinvol migrate plan: ${bad('mapping-typo.yaml')}: mappings.0.driver: missing; mappings.0: unknown key drivr${USAGE}`);
  });

  it('a mapping whose driver is not a CSI driver name is refused: the API server would refuse every PV of it', () => {
    const mapping = join(scratch, 'mapping-bad-driver.yaml');
    writeFileSync(mapping, 'mappings:\n  - match: k8s/nfs\n    driver: "nfs csi!"\n');
    const r = planOf({ files: [fixture('smb.json')], mappings: [mapping] });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toBe(`twinvol migrate plan: ${mapping}: mappings.0.driver "nfs csi!" must be a domain-style name of at most 63 characters${USAGE}`);
  });

  it('--mapping takes one file each time, and may be given again; the files after it are the input', async () => {
    const nfs = join(scratch, 'mapping-nfs.yaml');
    writeFileSync(nfs, 'mappings:\n  - match: k8s/nfs\n    driver: nfs.csi.k8s.io\n    options: {server: server, share: share}\n    ignore: [protocol, atime, readonly]\n    volumeHandle: "{server}#{share}##{pv}"\n');
    // Once a greedy list: cluster.yaml was read as a second mapping file, and the plan refused.
    const drivers = (stderr: string) => linesOf(stderr, 'planned').filter((l) => /^PersistentVolume\/(media|legacy-iscsi) /.test(l)).map((l) => l.split(' ')[3]);
    const once = await runAdmin({}, ['migrate', 'plan', '--mapping', nfs, fixture('cluster.yaml')]);
    expect({ exit: once.exitCode, drivers: drivers(once.stderr) }).toEqual({ exit: 0, drivers: ['nfs.csi.k8s.io', 'csi.twinvol.io'] });
    const twice = await runAdmin({}, ['migrate', 'plan', fixture('cluster.yaml'), '--mapping', nfs, '--mapping', fixture('mapping-iscsi.yaml')]);
    expect({ exit: twice.exitCode, drivers: drivers(twice.stderr) }).toEqual({ exit: 0, drivers: ['nfs.csi.k8s.io', 'iscsi.csi.k8s.io'] });
    const bare = await runAdmin({}, ['migrate', 'plan', fixture('cluster.yaml'), '--mapping']);
    expect({ exit: bare.exitCode, stderr: bare.stderr }).toEqual({ exit: 2, stderr: 'twinvol: Not enough arguments following: mapping (see: twinvol --help)\n' });
  });

  it('the executable gives the same one line for bytes that are not text at all, with no stack trace', async () => {
    const garbage = join(scratch, 'garbage.bin');
    writeFileSync(garbage, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 256)));
    const r = await runAdmin({}, ['migrate', 'plan', garbage]);
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.split('\n')).toHaveLength(2);
    expect(r.stderr).toMatch(new RegExp(`^twinvol migrate plan: ${garbage} document 1: not (YAML or JSON|a Kubernetes object)`));
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('PVs that cannot move: skipped with the object, the field and why (exit 1); the rest is planned', () => {
  const r = planOf({ files: [bad('pvs.yaml')], prefer: 'vendor' });

  it('plans the one that can move', () => {
    expect(r.exitCode).toBe(1);
    expect(linesOf(r.stderr, 'planned')).toEqual([
      'PersistentVolume/fine (acme/twinvol) -> csi.twinvol.io (same twinvol volume) volumeHandle fine, claim shop/fine',
      'PersistentVolume/twinvol-clash (acme/twinvol) -> csi.twinvol.io (same twinvol volume) volumeHandle clash, no claim',
    ]);
    expect(r.docs.map((d) => `${d.kind}/${(d.metadata as { name: string }).name}`)).toEqual(['PersistentVolume/fine', 'PersistentVolumeClaim/fine', 'PersistentVolume/twinvol-clash']);
  });

  it('names the object and the field of each one it skips', () => {
    expect(linesOf(r.stderr, 'skipped')).toEqual([
      // An unknown driver: no mapping, and not a name the exec backend can find.
      'PersistentVolume/odd-driver: spec.flexVolume.driver: driver "nfs" must be <vendor>/<name> (letters, digits, ".", "_", "-"): no mapping, and the exec backend finds drivers only by <vendor>/<name>',
      // A missing option the vendor's driver needs.
      'PersistentVolume/nfs-no-share: spec.flexVolume.options.share: is missing: nfs.csi.k8s.io needs it (mapping k8s/nfs -> nfs.csi.k8s.io: kubernetes/examples staging/volumes/flexvolume/nfs; csi-driver-nfs docs/driver-parameters.md)',
      // A claim it cannot find, and one bound elsewhere.
      'PersistentVolume/orphan: spec.claimRef names PersistentVolumeClaim shop/gone, which is not in the input (kubectl get pvc -n shop gone -o yaml)',
      'PersistentVolume/stolen: spec.claimRef names PersistentVolumeClaim shop/fine, which is bound to PersistentVolume fine',
      'PersistentVolume/typo: spec.flexVolume.options.volumeID: not an option twinvol reads (volumeId, createIfMissing, size, backend, fsType, readOnly, access, source, mountOptions); the FlexVolume driver refuses it too',
      'PersistentVolume/sizeless: spec.capacity.storage is missing',
      'PersistentVolume/numeric: spec.flexVolume.options.lun must be a string',
      'PersistentVolume/raw-exec: spec.volumeMode Block: the exec backend serves filesystems only (csi/exec-service.ts), as FlexVolume drivers do',
      'PersistentVolume/blob-no-secret-object: spec.flexVolume.secretRef: names Secret shop/creds, which is not in the input: blob.csi.azure.com reads other keys, so its data is needed (kubectl get secret -n shop creds -o yaml)',
      'PersistentVolume/job-data: PersistentVolumeClaim shop/job-data is used by Job shop/backfill: a Job cannot be stopped and started again; plan the move once it is done',
      // An exec volume whose id (its PV name) is one of twinvol's own volumes in the same catalog.
      "PersistentVolume/clash: metadata.name: clash would be the exec volume's id in twinvol's catalog, which PersistentVolume/twinvol-clash names as twinvol volume clash; use a mapping, or move one of them at a time",
    ]);
  });

  it('--no-exec skips a driver with no mapping instead of moving it behind the exec backend', () => {
    const noExec = planOf({ files: [fixture('cluster.yaml')], exec: false });
    expect(noExec.exitCode).toBe(1);
    expect(linesOf(noExec.stderr, 'skipped')).toEqual(
      ['media k8s/nfs', 'files fstab/cifs', 'archive azure/blobfuse', 'legacy-iscsi acme/iscsi'].map((s) => {
        const [pv, driver] = s.split(' ');
        return `PersistentVolume/${pv}: spec.flexVolume.driver: ${driver} has no mapping to a CSI driver (built-in ones apply with --prefer vendor; add one with --mapping), and --no-exec keeps it from the exec backend`;
      }),
    );
    expect(linesOf(noExec.stderr, 'planned')).toHaveLength(2);
  });
});

describe('a Secret copy whose name is taken', () => {
  const secret = (labels: Record<string, string>) => JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'blob-creds-csi', namespace: 'shop', labels }, data: { other: 'eA==' } });
  const ALL = [fixture('cluster.yaml'), fixture('workloads.yaml'), '-'];
  const archive = (r: ReturnType<typeof planOf>) => linesOf(r.stderr, 'skipped').filter((l) => l.includes('PersistentVolume/archive'));

  it('by a Secret of someone else\'s: the PV is skipped rather than that Secret replaced', () => {
    const r = planOf({ files: ALL, prefer: 'vendor' }, secret({ app: 'mine' }));
    expect(archive(r)).toEqual([expect.stringContaining('Secret shop/blob-creds-csi, the name of the copy with blob.csi.azure.com\'s keys, is taken by a Secret that is not a copy of blob-creds')]);
    expect(r.docs.filter((d) => d.kind === 'Secret')).toEqual([]);
  });

  it('by the copy an earlier plan made of the same Secret: planned as before', () => {
    const r = planOf({ files: ALL, prefer: 'vendor' }, secret({ 'migrate.twinvol.io/from-secret': 'blob-creds' }));
    expect(archive(r)).toEqual([]);
    expect(r.docs.filter((d) => d.kind === 'Secret').map((d) => (d.metadata as JsonObject).name)).toEqual(['blob-creds-csi']);
  });
});

describe('PVs pre-bound to a claim that is not bound yet', () => {
  it('are skipped, each naming the claim: two were planned for one claim, and migrate.sh could never pass its first check', () => {
    const pv = (name: string) => ({ apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name }, spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], claimRef: { name: 'data', namespace: 'default' }, flexVolume: { driver: 'twinvol/twinvol', options: { volumeId: name } } } });
    const claim = { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'data', namespace: 'default' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } };
    const r = planOf({ files: ['-'] }, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [pv('pv-1'), pv('pv-2'), claim] }));
    expect(linesOf(r.stderr, 'planned')).toEqual([]);
    expect(linesOf(r.stderr, 'skipped')).toEqual(['pv-1', 'pv-2'].map((n) => expect.stringMatching(new RegExp(`^PersistentVolume/${n}: .*PersistentVolumeClaim default/data, which is not bound`))));
  });
});

describe('PVs that would share one CSI volumeHandle', () => {
  // kubelet names a CSI volume <driver>^<volumeHandle>: two PVs with one pair are one volume to it.
  const nfsPv = (name: string, share: string) => ({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name },
    spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteMany'], flexVolume: { driver: 'k8s/nfs', options: { server: 'nfs.example.internal', share } } },
  });
  const csiPv = (name: string, volumeHandle: string) => ({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name },
    spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteMany'], csi: { driver: 'nfs.csi.k8s.io', volumeHandle } },
  });
  const input = (...items: object[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
  const HANDLE = 'nfs.example.internal#/exports/media#';

  it('skips every one of them, naming the others, and plans the rest', () => {
    const r = planOf({ files: ['-'], prefer: 'vendor' }, input(nfsPv('media-a', 'exports/media'), nfsPv('media-b', 'exports/media'), nfsPv('logs', 'exports/logs')));
    expect(r.exitCode).toBe(1);
    expect(linesOf(r.stderr, 'skipped')).toEqual(
      [['media-a', 'media-b'], ['media-b', 'media-a']].map(
        ([pv, other]) =>
          `PersistentVolume/${pv}: its nfs.csi.k8s.io volumeHandle ${HANDLE} would also be that of PersistentVolume/${other}: kubelet takes PVs of one driver and volumeHandle for one volume (one staging, one attachment); use a mapping whose volumeHandle has {pv} in it`,
      ),
    );
    expect(linesOf(r.stderr, 'planned')).toEqual([expect.stringMatching(/^PersistentVolume\/logs \(k8s\/nfs\) -> nfs\.csi\.k8s\.io/)]);
  });

  it('skips one whose handle a CSI PV in the input already has', () => {
    const r = planOf({ files: ['-'], prefer: 'vendor' }, input(nfsPv('media-a', 'exports/media'), csiPv('media-csi', HANDLE)));
    expect(linesOf(r.stderr, 'skipped')).toEqual([expect.stringMatching(/^PersistentVolume\/media-a: .* would also be that of PersistentVolume\/media-csi: /)]);
    expect(linesOf(r.stderr, 'planned')).toEqual([]);
  });

  it('plans both with a mapping whose volumeHandle has {pv} in it', () => {
    const mapping = join(scratch, 'nfs-per-pv.yaml');
    writeFileSync(mapping, 'mappings:\n  - match: k8s/nfs\n    driver: nfs.csi.k8s.io\n    options: {server: server, share: share}\n    required: [server, share]\n    volumeHandle: "{server}#{share}##{pv}"\n');
    const r = planOf({ files: ['-'], mappings: [mapping] }, input(nfsPv('media-a', 'exports/media'), nfsPv('media-b', 'exports/media')));
    expect(linesOf(r.stderr, 'skipped')).toEqual([]);
    expect(linesOf(r.stderr, 'planned').map((l) => l.replace(/ volumeHandle ([^\s,]+).*/, ' $1'))).toEqual([
      'PersistentVolume/media-a (k8s/nfs) -> nfs.csi.k8s.io nfs.example.internal#exports/media##media-a',
      'PersistentVolume/media-b (k8s/nfs) -> nfs.csi.k8s.io nfs.example.internal#exports/media##media-b',
    ]);
  });
});

describe('a secret the CSI PV could not name', () => {
  // The API server checks a FlexVolume PV's secretRef not at all, and a CSI PV's secret references as
  // DNS-1123 labels, name and namespace (pkg/apis/core/validation/validation.go,
  // validatePVSecretReference): planned, such a PV's apply failed in migrate.sh's step 6, after the
  // old PV and its claim had been deleted.
  const pv = (secretRef: object, driver = 'acme/twinvol') =>
    JSON.stringify({ apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'data' }, spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], flexVolume: { driver, secretRef } } });

  it.each([
    [{ name: 'db.creds', namespace: 'shop' }, 'acme/twinvol', 'nodePublishSecretRef', 'shop/db.creds'],
    [{ name: 'Creds', namespace: 'shop' }, 'acme/nfs', 'nodePublishSecretRef', 'shop/Creds'],
    [{ name: 'creds', namespace: 'Shop' }, 'acme/twinvol', 'nodePublishSecretRef', 'Shop/creds'],
    [{ name: 'c'.repeat(64), namespace: 'shop' }, 'acme/twinvol', 'nodePublishSecretRef', `shop/${'c'.repeat(64)}`],
  ])('secretRef %j (%s): skipped, naming the Secret and what to do', (secretRef, driver, field, named) => {
    const r = planOf({ files: ['-'] }, pv(secretRef, driver));
    expect(r.exitCode).toBe(1);
    expect(linesOf(r.stderr, 'skipped')).toEqual([
      `PersistentVolume/data: spec.flexVolume.secretRef: the CSI PV would name Secret ${named} in its ${field}, which must name a Secret and a namespace that are DNS-1123 labels (lower-case letters, digits and "-", at most 63 characters), which the API server checks for CSI PVs and not for FlexVolume ones, so the new PV would be refused after the old one was deleted; copy the Secret to such a name and point the PV at it first`,
    ]);
  });

  it('a secret the CSI PV can name is planned', () => {
    const r = planOf({ files: ['-'] }, pv({ name: 'db-creds', namespace: 'shop' }));
    expect(linesOf(r.stderr, 'skipped')).toEqual([]);
    expect(r.exitCode).toBe(0);
  });
});

describe('replicas that are not a count', () => {
  // The start step scales each workload back to spec.replicas: "3" was read as 1, and 2.5 or -1 made a
  // `kubectl scale` that failed once the claims had moved, with the workloads stopped.
  it.each([['"3"'], ['2.5'], ['-1'], ['true']])('spec.replicas %s: one line naming the object and the field, nothing planned', (replicas) => {
    const items = [
      { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'data' }, spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], claimRef: { namespace: 'shop', name: 'data' }, flexVolume: { driver: 'acme/twinvol' } } },
      { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'data', namespace: 'shop' }, spec: { resources: { requests: { storage: '1Gi' } }, volumeName: 'data' } },
      { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', namespace: 'shop' }, spec: { replicas: JSON.parse(replicas) as unknown, template: { spec: { containers: [], volumes: [{ name: 'd', persistentVolumeClaim: { claimName: 'data' } }] } } } },
    ];
    const r = planOf({ files: ['-'] }, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    expect(r).toMatchObject({ exitCode: 2, stdout: '' });
    expect(r.stderr).toBe(`twinvol migrate plan: Deployment shop/web: spec.replicas must be a whole number of 0 or more${USAGE}`);
  });
});
