import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../deploy/load.js';
import { linesOf, only, planOf, yamlDocs } from './plan-helpers.js';

/**
 * A claim that asks more than its PV holds (an expansion asked on the claim that the FlexVolume
 * driver never made). kube-controller-manager binds a claim to the PV its volumeName names only when
 * the PV's capacity is at least the claim's request, both rounded up to whole bytes
 * (pkg/controller/volume/persistentvolume/pv_controller.go, checkVolumeSatisfyClaim): re-created as
 * it was, the claim stayed Pending ("requested PV is too small") with its workloads stopped. The PV
 * keeps its size; both re-created claims (forward and rollback) ask for what it holds.
 */
const scratch = mkdtempSync(join(tmpdir(), 'twinvol-plan-size-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function cluster(capacity: string, request: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'v1', kind: 'PersistentVolume', metadata: { name: 'data' }, spec: { capacity: { storage: capacity }, accessModes: ['ReadWriteOnce'], claimRef: { namespace: 'shop', name: 'data' }, flexVolume: { driver: 'acme/twinvol' } } },
      { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'data', namespace: 'shop' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: request }, limits: { storage: '1Ti' } }, volumeName: 'data' }, status: { phase: 'Bound', capacity: { storage: capacity } } },
    ],
  });
}

const storageOf = (doc: JsonObject, path: 'claim' | 'pv') => {
  const spec = doc.spec as JsonObject;
  return path === 'pv' ? (spec.capacity as JsonObject).storage : ((spec.resources as JsonObject).requests as JsonObject).storage;
};

/** The plan written with --out: its new PV and claim, and the rollback's claim. */
function planned(capacity: string, request: string) {
  const out = join(scratch, `${capacity}-${request}`);
  const r = planOf({ files: ['-'], out }, cluster(capacity, request));
  const manifest = yamlDocs(readFileSync(join(out, 'manifests/01-data.yaml'), 'utf8'));
  const rollback = yamlDocs(readFileSync(join(out, 'rollback/01-data.yaml'), 'utf8'));
  return { r, pv: only(manifest, 'PersistentVolume', 'data'), claim: only(manifest, 'PersistentVolumeClaim', 'data'), rollbackClaim: only(rollback, 'PersistentVolumeClaim', 'data') };
}

describe('a claim whose request is more than its PV holds', () => {
  it.each([
    ['10Gi', '20Gi'],
    ['1G', '1Gi'], // 10^9 bytes against 2^30: the request is the larger
    ['1073741824', '1073741825'],
    ['1Ki', '1025'],
  ])('PV %s, claim %s: both re-created claims ask for what the PV holds, the PV keeps its size, and a note says so', (capacity, request) => {
    const { r, pv, claim, rollbackClaim } = planned(capacity, request);
    expect(r.exitCode).toBe(0);
    expect(storageOf(pv, 'pv')).toBe(capacity);
    expect(storageOf(claim, 'claim')).toBe(capacity);
    expect(storageOf(rollbackClaim, 'claim')).toBe(capacity);
    // The rest of the claim's resources stay as they were.
    expect(((claim.spec as JsonObject).resources as JsonObject).limits).toEqual({ storage: '1Ti' });
    expect(((rollbackClaim.spec as JsonObject).resources as JsonObject).limits).toEqual({ storage: '1Ti' });
    expect(linesOf(r.stderr, 'note')).toEqual([
      `PersistentVolume/data: PersistentVolumeClaim shop/data requests ${request}, more than the ${capacity} of the PV (an expansion the FlexVolume driver never made): kube-controller-manager binds a claim to the PV it names only if the PV is at least as large as its request, so the re-created claim, and the rollback's, request ${capacity}, what the volume holds; ask for more again once the claim is Bound`,
    ]);
  });

  it.each([
    ['10Gi', '10Gi'],
    ['10Gi', '10737418240'],
    ['1Gi', '1G'],
    ['2Gi', '1500m'], // rounded up to 2 bytes, as the API's Quantity.Value() rounds
  ])('PV %s, claim %s: a request that fits stays as it was, with no note', (capacity, request) => {
    const { r, claim, rollbackClaim } = planned(capacity, request);
    expect(r.exitCode).toBe(0);
    expect(storageOf(claim, 'claim')).toBe(request);
    expect(storageOf(rollbackClaim, 'claim')).toBe(request);
    expect(linesOf(r.stderr, 'note')).toEqual([]);
  });
});

describe('sizes that are not Kubernetes quantities', () => {
  it.each([
    ['ten gigs', '1Gi', 'PersistentVolume/data: spec.capacity.storage "ten gigs" is not a Kubernetes quantity (such as 10Gi)'],
    ['-1Gi', '1Gi', 'PersistentVolume/data: spec.capacity.storage "-1Gi" is not a Kubernetes quantity (such as 10Gi)'],
    ['1Gi', '1Gi; rm -rf /', 'PersistentVolumeClaim shop/data: spec.resources.requests.storage "1Gi; rm -rf /" is not a Kubernetes quantity (such as 10Gi)'],
    // The API's ParseQuantity takes no blank around the number (the CLI's --size is trimmed, not these).
    [' 10Gi', '1Gi', 'PersistentVolume/data: spec.capacity.storage " 10Gi" is not a Kubernetes quantity (such as 10Gi)'],
    ['10Gi', '1Gi\n', 'PersistentVolumeClaim shop/data: spec.resources.requests.storage "1Gi\\n" is not a Kubernetes quantity (such as 10Gi)'],
  ])('capacity %j, request %j: the PV is skipped, naming the field (its apply would fail only after the old PV was deleted)', (capacity, request, message) => {
    const r = planOf({ files: ['-'] }, cluster(capacity, request));
    expect(r.exitCode).toBe(1);
    expect(linesOf(r.stderr, 'skipped')).toEqual([message]);
    expect(linesOf(r.stderr, 'planned')).toEqual([]);
  });
});
