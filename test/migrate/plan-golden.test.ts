import { describe, expect, it } from 'vitest';
import { TWINVOL_CSI_DRIVER } from '../../flex/migrate/targets.js';
import { loadManifests, type JsonObject } from '../deploy/load.js';
import { expectValid, fixture, linesOf, only, planOf, pvShell } from './plan-helpers.js';

/**
 * Golden tests of `twinvol migrate plan` (issue 10, item 1): the fixtures are kubectl's output for a
 * namespace on FlexVolume (fixtures/cluster.yaml a List, fixtures/workloads.yaml multi-document,
 * fixtures/smb.json JSON), and every object the plan emits is checked whole, field by field, against
 * what the move must produce, then validated offline against the Kubernetes schemas.
 */
const ALL = [fixture('cluster.yaml'), fixture('workloads.yaml'), fixture('smb.json')];
const shop = (name: string): [string, string] => ['shop', name];

const DB_AFFINITY = { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: ['node-1'] }] }] } };

/** The claims, the same in every mode: pre-bound, storage class pinned, server fields gone. */
const CLAIMS: JsonObject[] = [
  claim('shop', 'data-db-0', 'pv-db-0', ['ReadWriteOnce'], '20Gi', '', { volumeMode: 'Filesystem' }, { labels: { app: 'db' } }),
  claim('shop', 'raw-scratch', 'pv-raw', ['ReadWriteOnce'], '5Gi', '', { volumeMode: 'Block' }),
  claim('shop', 'media', 'media', ['ReadWriteMany'], '100Gi', 'nfs', {}, { annotations: { team: 'media' } }),
  claim('shop', 'files', 'files', ['ReadOnlyMany'], '50Gi', ''),
  claim('shop', 'archive', 'archive', ['ReadWriteMany'], '1Ti', ''),
  claim('shop', 'legacy', 'legacy-iscsi', ['ReadWriteOnce'], '8Gi', ''),
  claim('finance', 'reports', 'reports-smb', ['ReadWriteMany'], '100Gi', ''),
];

function claim(namespace: string, name: string, pv: string, accessModes: string[], size: string, storageClassName: string, spec: JsonObject = {}, meta: JsonObject = {}): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace, ...meta },
    spec: { accessModes, resources: { requests: { storage: size } }, storageClassName, volumeName: pv, ...spec },
  };
}

/** twinvol's own PVs: the same catalog volume, whatever --prefer says. */
const TWINVOL_PVS: JsonObject[] = [
  pvShell(
    'pv-db-0',
    'acme/twinvol',
    'Delete',
    shop('data-db-0'),
    {
      capacity: { storage: '20Gi' },
      accessModes: ['ReadWriteOnce'],
      volumeMode: 'Filesystem',
      storageClassName: '',
      nodeAffinity: DB_AFFINITY,
      csi: { driver: 'csi.twinvol.io', volumeHandle: 'db-0', fsType: 'xfs', volumeAttributes: { backend: 'block' } },
    },
    { app: 'db', tier: 'data' },
  ),
  // No volumeId option: the PV name is the volume id (flex/options.ts volumeIdOfPv). Raw block stays raw block.
  pvShell('pv-raw', 'acme/twinvol', 'Retain', shop('raw-scratch'), { capacity: { storage: '5Gi' }, accessModes: ['ReadWriteOnce'], volumeMode: 'Block', csi: { driver: 'csi.twinvol.io', volumeHandle: 'pv-raw' } }, { app: 'legacy' }),
];

/** acme/iscsi's PV: the same shell whichever CSI driver takes it (the exec backend, or --mapping). */
const iscsiPv = (csi: JsonObject): JsonObject => pvShell('legacy-iscsi', 'acme/iscsi', 'Retain', shop('legacy'), { capacity: { storage: '8Gi' }, accessModes: ['ReadWriteOnce'], csi }, { app: 'legacy' });

const ISCSI_EXEC = iscsiPv({
  driver: 'csi.twinvol.io',
  volumeHandle: 'legacy-iscsi',
  fsType: 'ext4',
  volumeAttributes: { backend: 'exec', driver: 'acme/iscsi', iqn: 'iqn.2019-04.internal.example:legacy', lun: '0', portal: '10.0.0.5:3260' },
  nodePublishSecretRef: { name: 'iscsi-chap', namespace: 'shop' },
});

describe('migrate plan: every driver behind csi.twinvol.io (the default, --prefer exec)', () => {
  const run = planOf({ files: ALL });

  it('emits the PVs and claims whole, in input order, each PV before its claim', () => {
    const execPvs: JsonObject[] = [
      pvShell('media', 'k8s/nfs', 'Retain', shop('media'), {
        capacity: { storage: '100Gi' },
        accessModes: ['ReadWriteMany'],
        storageClassName: 'nfs',
        csi: { driver: 'csi.twinvol.io', volumeHandle: 'media', fsType: 'nfs', volumeAttributes: { backend: 'exec', driver: 'k8s/nfs', protocol: 'udp', server: 'nfs.example.internal', share: 'exports/media' } },
      }),
      pvShell('files', 'fstab/cifs', 'Retain', shop('files'), {
        capacity: { storage: '50Gi' },
        accessModes: ['ReadOnlyMany'],
        csi: {
          driver: 'csi.twinvol.io',
          volumeHandle: 'files',
          fsType: 'cifs',
          readOnly: true,
          volumeAttributes: { backend: 'exec', driver: 'fstab/cifs', mountOptions: 'dir_mode=0755,file_mode=0644,noperm', networkPath: '//fs.example.internal/files', selinuxEnabled: 'true' },
          nodePublishSecretRef: { name: 'cifs-secret', namespace: 'shop' },
        },
      }),
      // secretRef without a namespace: kubelet read it from the pod's, which is the claim's.
      pvShell('archive', 'azure/blobfuse', 'Delete', shop('archive'), {
        capacity: { storage: '1Ti' },
        accessModes: ['ReadWriteMany'],
        csi: {
          driver: 'csi.twinvol.io',
          volumeHandle: 'archive',
          volumeAttributes: { backend: 'exec', driver: 'azure/blobfuse', container: 'archive', mountoptions: '--file-cache-timeout-in-seconds=120 --use-attr-cache=true', tmppath: '/mnt/blobfuse/archive' },
          nodePublishSecretRef: { name: 'blob-creds', namespace: 'shop' },
        },
      }),
      ISCSI_EXEC,
      pvShell(
        'reports-smb',
        'microsoft.com/smb',
        'Retain',
        ['finance', 'reports'],
        {
          capacity: { storage: '100Gi' },
          accessModes: ['ReadWriteMany'],
          csi: {
            driver: 'csi.twinvol.io',
            volumeHandle: 'reports-smb',
            volumeAttributes: { backend: 'exec', driver: 'microsoft.com/smb', source: '//fs.example.internal/reports', mountoptions: 'vers=3.0,dir_mode=0777', mountOptions: 'file_mode=0777' },
            nodePublishSecretRef: { name: 'smbcreds', namespace: 'finance' },
          },
        },
        { team: 'finance' },
      ),
    ];
    const pvs = [...TWINVOL_PVS, ...execPvs];
    const expected = pvs.flatMap((pv, i) => [pv, CLAIMS[i] as JsonObject]);
    expect(run.docs).toEqual(expected);
    expectValid(run.docs);
  });

  it('says what it planned, what each claim restarts, and exits 1 for the inline volume it cannot replace', () => {
    expect(run.exitCode).toBe(1);
    expect(linesOf(run.stderr, 'planned')).toEqual([
      'PersistentVolume/pv-db-0 (acme/twinvol) -> csi.twinvol.io (same twinvol volume) volumeHandle db-0, claim shop/data-db-0; restart StatefulSet shop/db',
      'PersistentVolume/pv-raw (acme/twinvol) -> csi.twinvol.io (same twinvol volume) volumeHandle pv-raw, claim shop/raw-scratch; restart Deployment shop/legacy-app',
      'PersistentVolume/media (k8s/nfs) -> csi.twinvol.io (exec backend, driver k8s/nfs) volumeHandle media, claim shop/media; restart Deployment shop/web, DaemonSet shop/log-shipper',
      'PersistentVolume/files (fstab/cifs) -> csi.twinvol.io (exec backend, driver fstab/cifs) volumeHandle files, claim shop/files; restart Pod shop/report',
      'PersistentVolume/archive (azure/blobfuse) -> csi.twinvol.io (exec backend, driver azure/blobfuse) volumeHandle archive, claim shop/archive; restart CronJob shop/archiver',
      'PersistentVolume/legacy-iscsi (acme/iscsi) -> csi.twinvol.io (exec backend, driver acme/iscsi) volumeHandle legacy-iscsi, claim shop/legacy; restart Deployment shop/legacy-app',
      'PersistentVolume/reports-smb (microsoft.com/smb) -> csi.twinvol.io (exec backend, driver microsoft.com/smb) volumeHandle reports-smb, claim finance/reports',
    ]);
    expect(linesOf(run.stderr, 'skipped')).toEqual([
      "Pod shop/report: spec.volumes[cache].flexVolume: twinvol's CSI inline volumes are made and deleted with their pod (csi/ephemeral.ts), so they cannot reach volume report-cache: give it a PV (csi.volumeHandle: report-cache) and a claim",
    ]);
  });

  it('reports each inline flexVolume of a template once (not again for its pods) with a valid CSI inline volume', () => {
    const inline = linesOf(run.stderr, 'inline');
    expect(inline.map((l) => l.slice(0, l.indexOf(' -> ')))).toEqual(['Deployment shop/web volume static (k8s/nfs)', 'Deployment shop/legacy-app volume smb-share (microsoft.com/smb)']);
    const replacements = inline.map((l) => JSON.parse(l.slice(l.indexOf(' -> ') + 4).replace(/ \(.*\)$/, '')) as JsonObject);
    // Each goes through the exec backend, which serves a driver's inline volumes only when told to.
    expect(inline[0]).toContain('the twinvol CSI node plugin serves it only when run with --flex-inline k8s/nfs');
    expect(inline[1]).toContain('--flex-inline microsoft.com/smb');
    expect(replacements).toEqual([
      { name: 'static', csi: { driver: 'csi.twinvol.io', fsType: 'nfs', readOnly: true, volumeAttributes: { backend: 'exec', driver: 'k8s/nfs', server: 'nfs.example.internal', share: '/exports/static' } } },
      { name: 'smb-share', csi: { driver: 'csi.twinvol.io', volumeAttributes: { backend: 'exec', driver: 'microsoft.com/smb', source: '//fs.example.internal/legacy', mountoptions: 'vers=3.0' }, nodePublishSecretRef: { name: 'smbcreds' } } },
    ]);
    // A replacement is a pod volume the API server takes.
    expectValid([{ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'shop' }, spec: { containers: [{ name: 'c', image: 'busybox' }], volumes: replacements } }]);
  });

  it('reads stdin ("-") and a single JSON object as well as files', () => {
    const pv = { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'solo' }, spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], flexVolume: { driver: 'acme/twinvol', options: { volumeId: 'solo-vol' } } } };
    const r = planOf({ files: ['-'] }, JSON.stringify(pv));
    expect(r.exitCode).toBe(0);
    expect(r.docs).toEqual([pvShell('solo', 'acme/twinvol', 'Retain', undefined, { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], csi: { driver: 'csi.twinvol.io', volumeHandle: 'solo-vol' } })]);
    expect(linesOf(r.stderr, 'planned')).toEqual(['PersistentVolume/solo (acme/twinvol) -> csi.twinvol.io (same twinvol volume) volumeHandle solo-vol, no claim']);
  });
});

describe("migrate plan: twinvol's own options", () => {
  it('keeps what describes the volume as volumeAttributes (the catalog checks them), read-only as csi.readOnly, and notes createIfMissing', () => {
    const pv = {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: 'scratch' },
      spec: {
        capacity: { storage: '64Mi' },
        accessModes: ['ReadOnlyMany'],
        flexVolume: {
          driver: 'storage.example.com/twinvol',
          options: { volumeId: 'scratch', backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: 'size=64m', access: 'multi-node', readOnly: 'true', createIfMissing: 'true', size: '64Mi' },
        },
      },
    };
    const r = planOf({ files: ['-'] }, JSON.stringify(pv));
    expect(r.exitCode).toBe(0);
    expect(r.docs).toEqual([
      pvShell('scratch', 'storage.example.com/twinvol', 'Retain', undefined, {
        capacity: { storage: '64Mi' },
        accessModes: ['ReadOnlyMany'],
        csi: { driver: 'csi.twinvol.io', volumeHandle: 'scratch', readOnly: true, volumeAttributes: { backend: 'static', fsType: 'tmpfs', source: 'tmpfs', mountOptions: 'size=64m' } },
      }),
    ]);
    expectValid(r.docs);
    expect(linesOf(r.stderr, 'note')).toEqual([
      `PersistentVolume/scratch: createIfMissing: volume scratch must exist before the move (twinvol volume inspect scratch); twinvol-csi does not create a static PV's volume`,
    ]);
  });
});

describe('migrate plan --prefer vendor: the built-in mappings to the vendors\' CSI drivers', () => {
  const run = planOf({ files: ALL, prefer: 'vendor' });

  it('maps k8s/nfs, fstab/cifs, azure/blobfuse and microsoft.com/smb field by field; other drivers stay on exec', () => {
    const media = pvShell('media', 'k8s/nfs', 'Retain', shop('media'), {
      capacity: { storage: '100Gi' },
      accessModes: ['ReadWriteMany'],
      storageClassName: 'nfs',
      // The options the k8s/nfs script always mounted with (its protocol option was never read).
      mountOptions: ['proto=tcp', 'soft', 'timeo=10', 'noatime'],
      csi: { driver: 'nfs.csi.k8s.io', volumeHandle: 'nfs.example.internal#/exports/media#', volumeAttributes: { server: 'nfs.example.internal', share: '/exports/media' } },
    });
    const files = pvShell('files', 'fstab/cifs', 'Retain', shop('files'), {
      capacity: { storage: '50Gi' },
      accessModes: ['ReadOnlyMany'],
      mountOptions: ['dir_mode=0755', 'file_mode=0644', 'noperm', 'context=system_u:object_r:container_file_t:s0'],
      csi: { driver: 'smb.csi.k8s.io', volumeHandle: '//fs.example.internal/files##', readOnly: true, volumeAttributes: { source: '//fs.example.internal/files' }, nodeStageSecretRef: { name: 'cifs-secret', namespace: 'shop' } },
    });
    const blobSecret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'blob-creds-csi', namespace: 'shop', labels: { 'migrate.twinvol.io/from-secret': 'blob-creds' } },
      type: 'Opaque',
      data: { azurestorageaccountkey: 'a2V5a2V5a2V5', azurestorageaccountname: 'c2hvcGFyY2hpdmU=' },
    };
    const archive = pvShell('archive', 'azure/blobfuse', 'Delete', shop('archive'), {
      capacity: { storage: '1Ti' },
      accessModes: ['ReadWriteMany'],
      mountOptions: ['--file-cache-timeout-in-seconds=120', '--use-attr-cache=true', '--tmp-path=/mnt/blobfuse/archive'],
      csi: {
        driver: 'blob.csi.azure.com',
        volumeHandle: 'shoparchive_archive',
        volumeAttributes: { protocol: 'fuse', containerName: 'archive', storageAccount: 'shoparchive' },
        nodeStageSecretRef: { name: 'blob-creds-csi', namespace: 'shop' },
      },
    });
    const smb = pvShell(
      'reports-smb',
      'microsoft.com/smb',
      'Retain',
      ['finance', 'reports'],
      {
        capacity: { storage: '100Gi' },
        accessModes: ['ReadWriteMany'],
        mountOptions: ['vers=3.0', 'dir_mode=0777'],
        csi: { driver: 'smb.csi.k8s.io', volumeHandle: '//fs.example.internal/reports##', volumeAttributes: { source: '//fs.example.internal/reports' }, nodeStageSecretRef: { name: 'smbcreds', namespace: 'finance' } },
      },
      { team: 'finance' },
    );
    const [db, raw] = TWINVOL_PVS as [JsonObject, JsonObject];
    const c = CLAIMS as JsonObject[];
    expect(run.docs).toEqual([db, c[0], raw, c[1], media, c[2], files, c[3], blobSecret, archive, c[4], ISCSI_EXEC, c[5], smb, c[6]]);
    expectValid(run.docs);
  });

  it('notes every option it dropped and every secret it copied', () => {
    expect(linesOf(run.stderr, 'note')).toEqual([
      'PersistentVolume/media: spec.flexVolume.options.protocol dropped: the k8s/nfs script always mounted with tcp, whatever this option said',
      'PersistentVolume/media: spec.flexVolume.fsType nfs dropped: nfs.csi.k8s.io mounts its own filesystem type',
      'PersistentVolume/files: spec.flexVolume.fsType cifs dropped: smb.csi.k8s.io mounts its own filesystem type',
      "PersistentVolume/archive: Secret shop/blob-creds-csi: a copy of blob-creds with blob.csi.azure.com's keys (accountname -> azurestorageaccountname, accountkey -> azurestorageaccountkey)",
      'PersistentVolume/reports-smb: spec.flexVolume.options.mountOptions dropped: the microsoft.com/smb script reads only "mountoptions" (lower case); these options were never applied',
    ]);
  });
});

describe('migrate plan --mapping: a driver the built-ins do not know', () => {
  it('maps acme/iscsi by the file, whatever --prefer says, and leaves the rest as they were', () => {
    const r = planOf({ files: ALL, mappings: [fixture('mapping-iscsi.yaml')] });
    const pv = only(r.docs, 'PersistentVolume', 'legacy-iscsi');
    expect(pv).toEqual(
      iscsiPv({
        driver: 'iscsi.csi.k8s.io',
        volumeHandle: '10.0.0.5:3260#iqn.2019-04.internal.example:legacy#0',
        fsType: 'ext4',
        volumeAttributes: { discoveryCHAPAuth: 'false', sessionCHAPAuth: 'true', targetPortal: '10.0.0.5:3260', iqn: 'iqn.2019-04.internal.example:legacy', lun: '0' },
        nodePublishSecretRef: { name: 'iscsi-chap', namespace: 'shop' },
      }),
    );
    expect((only(r.docs, 'PersistentVolume', 'media').spec as JsonObject).csi).toMatchObject({ driver: 'csi.twinvol.io' });
    expectValid(r.docs);
  });
});

describe('the CSI driver name', () => {
  it('is the one deploy/csidriver.yaml registers', () => {
    const drivers = loadManifests().docs.filter((m) => m.doc.kind === 'CSIDriver');
    expect(drivers.map((m) => (m.doc.metadata as JsonObject).name)).toEqual([TWINVOL_CSI_DRIVER]);
    expect(TWINVOL_CSI_DRIVER).toBe('csi.twinvol.io');
  });
});
