import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { linesOf, planOf } from './plan-helpers.js';

/**
 * A password written inline (a PV's flexVolume.options, a pod's inline flexVolume, password= among
 * mountOptions) goes where it must, into the manifests that replace the objects holding it, and
 * nowhere else: not into the report on stderr, and not into a file anyone else may read. A Secret's
 * data copied for a vendor driver: test/migrate/plan-out.test.ts.
 */
const PASSWORD = 'inline-3f9b-MUST-NOT-LEAK';
const MOUNT_PASSWORD = 'mo-3f9b-MUST-NOT-LEAK';
const POD_PASSWORD = 'pod-3f9b-MUST-NOT-LEAK';
const SECRETS = [PASSWORD, MOUNT_PASSWORD, POD_PASSWORD];

const pv = (name: string, claim: string, options: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name },
  spec: {
    accessModes: ['ReadWriteOnce'],
    capacity: { storage: '1Gi' },
    claimRef: { kind: 'PersistentVolumeClaim', name: claim, namespace: 'shop' },
    flexVolume: { driver: 'acme/nfsish', options },
    persistentVolumeReclaimPolicy: 'Retain',
  },
  status: { phase: 'Bound' },
});
const claim = (name: string, volume: string) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name, namespace: 'shop' },
  spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, volumeName: volume },
  status: { phase: 'Bound' },
});
// A bare pod (re-created from pods/ after the move) that also has an inline flexVolume with a password.
const pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p1', namespace: 'shop' },
  spec: {
    containers: [{ name: 'c', image: 'busybox' }],
    volumes: [
      { name: 'data', persistentVolumeClaim: { claimName: 'c-inline' } },
      { name: 'side', flexVolume: { driver: 'acme/nfsish', options: { server: 'nfs.example', password: POD_PASSWORD } } },
    ],
  },
  status: { phase: 'Running' },
};
const input = JSON.stringify({
  apiVersion: 'v1',
  kind: 'List',
  items: [
    pv('pv-inline', 'c-inline', { server: 'nfs.example', password: PASSWORD, mountOptions: `vers=4,password=${MOUNT_PASSWORD}` }),
    claim('c-inline', 'pv-inline'),
    pv('pv-plain', 'c-plain', { server: 'nfs.example', share: '/plain' }),
    claim('c-plain', 'pv-plain'),
    pod,
  ],
});

const root = mkdtempSync(join(tmpdir(), 'twinvol-plan-secrets-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]));
}

describe('migrate plan: a password written inline', () => {
  it('is not in the report; the files that must hold it are the owner\'s alone, the others stay readable', () => {
    const out = join(root, 'out');
    const run = planOf({ files: ['-'], out }, input);
    expect(run.exitCode).toBe(0);
    // The report still shows the inline volume's replacement, its password cut.
    expect(linesOf(run.stderr, 'inline')).toEqual([expect.stringContaining('"volumeAttributes":{"backend":"exec","driver":"acme/nfsish","server":"nfs.example","password":"[redacted]"}')]);
    for (const s of SECRETS) expect(run.stderr).not.toContain(s);

    const modes = Object.fromEntries(
      filesUnder(out).map((f) => {
        const text = readFileSync(f, 'utf8');
        return [relative(out, f), { holds: SECRETS.some((s) => text.includes(s)), mode: (statSync(f).mode & 0o777).toString(8) }];
      }),
    );
    // The moved PV's manifest and original carry its password; the bare pod's file and STEPS.md the pod's.
    const holding = Object.keys(modes).filter((f) => modes[f]!.holds).sort();
    expect(holding).toEqual(['STEPS.md', 'manifests/01-pv-inline.yaml', 'pods/shop_p1.yaml', 'rollback/01-pv-inline.yaml']);
    for (const [f, m] of Object.entries(modes)) expect({ f, mode: m.mode }).toEqual({ f, mode: m.holds ? '600' : f.endsWith('.sh') ? '755' : '644' });
  });
});

describe('migrate plan: a password among the mount options of a PV moved to a vendor driver', () => {
  // fstab/cifs to smb.csi.k8s.io (flex/migrate/mappings.ts): its options' mountOptions become the new
  // PV's spec.mountOptions, a list, where the password is one item of its own.
  const CIFS_PASSWORD = 'cifs-3f9b-MUST-NOT-LEAK';
  const withFlex = (o: ReturnType<typeof pv>, flexVolume: object) => ({ ...o, spec: { ...o.spec, flexVolume } });
  const cifs = JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      withFlex(pv('files', 'files', {}), { driver: 'fstab/cifs', options: { networkPath: '//fs.example/files', mountOptions: `vers=3.0,password=${CIFS_PASSWORD}` }, secretRef: { name: 'cifs-secret' } }),
      claim('files', 'files'),
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'cifs-secret', namespace: 'shop' }, type: 'fstab/cifs', data: { username: 'dQ==', password: 'cA==' } },
    ],
  });

  it("is in spec.mountOptions of the new PV, whose manifest is the owner's alone", () => {
    const out = join(root, 'vendor');
    const run = planOf({ files: ['-'], out, prefer: 'vendor' }, cifs);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).not.toContain(CIFS_PASSWORD);
    const manifest = join(out, 'manifests/01-files.yaml');
    expect(readFileSync(manifest, 'utf8')).toContain(`- password=${CIFS_PASSWORD}`);
    expect((statSync(manifest).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(join(out, 'rollback/01-files.yaml')).mode & 0o777).toString(8)).toBe('600');
  });
});
