import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mountCap, targetPath } from '../csi/helpers/requests.js';
import type { JsonObject } from '../deploy/load.js';
import { useExecServer } from '../exec/helpers.js';
import { only, planOf } from './plan-helpers.js';

/**
 * A third-party FlexVolume PV moved by `migrate plan` to twinvol-csi's exec backend, then published by a
 * real server running the driver (test/exec/drivers/tmpfs.sh, as acme/tmpfs): the driver's `mount`
 * gets the options it got from kubelet under FlexVolume, the PV's own ones, the PV name as
 * kubernetes.io/pvOrVolumeName (the volumeHandle is the PV name for that reason) and the secret the
 * PV's secretRef named, now the node publish secret.
 */
const exec = useExecServer();

const SECRET = 's3cret pass';

describe("migrate plan's exec PVs, served by twinvol-csi's exec backend", () => {
  it('the driver sees what kubelet gave it: its options, the PV name, the secret', async () => {
    const input = [
      {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: 'team-share' },
        spec: {
          capacity: { storage: '8Mi' },
          accessModes: ['ReadWriteMany'],
          claimRef: { namespace: 'shop', name: 'share' },
          flexVolume: { driver: 'acme/tmpfs', options: { share: 'team-a', quota: '8m' }, secretRef: { name: 'share-creds' } },
        },
      },
      { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: 'share', namespace: 'shop' }, spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '8Mi' } }, volumeName: 'team-share' } },
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'share-creds', namespace: 'shop' }, type: 'acme/tmpfs', data: { password: Buffer.from(SECRET).toString('base64') } },
    ];
    const plan = planOf({ files: ['-'] }, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: input }));
    expect(plan.exitCode).toBe(0);
    const csi = (only(plan.docs, 'PersistentVolume', 'team-share').spec as JsonObject).csi as JsonObject;
    expect(csi).toEqual({
      driver: 'csi.twinvol.io',
      volumeHandle: 'team-share',
      volumeAttributes: { backend: 'exec', driver: 'acme/tmpfs', share: 'team-a', quota: '8m' },
      nodePublishSecretRef: { name: 'share-creds', namespace: 'shop' },
    });

    // kubelet: the PV's volumeAttributes plus the pod (podInfoOnMount), the Secret's data as node_publish_secrets.
    const id = csi.volumeHandle as string;
    const target = targetPath(exec.s.kubeletDir, 'uid-share', 'team-share');
    const volume_context = { ...(csi.volumeAttributes as Record<string, string>), 'csi.storage.k8s.io/pod.name': 'web-0', 'csi.storage.k8s.io/pod.namespace': 'shop', 'csi.storage.k8s.io/pod.uid': 'uid-share', 'csi.storage.k8s.io/serviceAccount.name': 'default' };
    await exec.node('NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap('', 'MULTI_NODE_MULTI_WRITER'), volume_context, secrets: { password: SECRET } });
    const mount = exec.calls('tmpfs').find((c) => c[0] === 'mount');
    expect(JSON.parse(mount?.[2] ?? '{}')).toEqual({
      share: 'team-a',
      quota: '8m',
      'kubernetes.io/fsType': '',
      'kubernetes.io/readwrite': 'rw',
      'kubernetes.io/pvOrVolumeName': 'team-share',
      'kubernetes.io/pod.name': 'web-0',
      'kubernetes.io/pod.namespace': 'shop',
      'kubernetes.io/pod.uid': 'uid-share',
      'kubernetes.io/serviceAccount.name': 'default',
      'kubernetes.io/secret/password': Buffer.from(SECRET).toString('base64'),
    });
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).toContain(` ${target} `);
    await exec.node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(` ${target} `);
  });
});
