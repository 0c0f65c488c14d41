import { describe, expect, it } from 'vitest';
import { mountCap, targetPath } from '../csi/helpers/requests.js';
import { optionsOf, useExecServer } from './helpers.js';

/**
 * kubelet's FlexVolume mount always names the pod (mounter.go SetUpAt: kubernetes.io/pod.name,
 * pod.namespace, pod.uid, serviceAccount.name). Through CSI the pod comes only with the CSIDriver
 * object's podInfoOnMount: true, which deploy/csidriver.yaml sets (test/deploy pins it). A deployment of
 * its own without it still mounts, but each such publish is logged as a warning that says what to set.
 */
const csi = useExecServer();
const POD = { 'csi.storage.k8s.io/pod.name': 'web-0', 'csi.storage.k8s.io/pod.namespace': 'shop', 'csi.storage.k8s.io/pod.uid': 'uid-pod', 'csi.storage.k8s.io/serviceAccount.name': 'web' };

describe('exec backend: the pod on mount', () => {
  it('with CSI pod info the driver gets kubelet\'s pod keys; without it, the same mount and a warning naming podInfoOnMount', async () => {
    const publish = async (id: string, extra: Record<string, string>) => {
      const target = targetPath(csi.s.kubeletDir, `uid-${id}`, id);
      await csi.node('NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: { backend: 'exec', driver: 'acme/tmpfs', ...extra } });
      const mount = csi.calls('tmpfs').find((c) => c[0] === 'mount' && c[1] === target);
      const { entries } = await csi.server.logWhen((e) => e.some((l) => l.msg === 'rpc' && l.method === 'NodePublishVolume' && l.volumeId === id));
      const line = entries.find((l) => l.msg === 'rpc' && l.method === 'NodePublishVolume' && l.volumeId === id);
      await csi.node('NodeUnpublishVolume', { volume_id: id, target_path: target });
      return { options: optionsOf(mount, 2), line };
    };

    const told = await publish('with-pod', POD);
    expect(told.options).toMatchObject({ 'kubernetes.io/pod.name': 'web-0', 'kubernetes.io/pod.namespace': 'shop', 'kubernetes.io/pod.uid': 'uid-pod', 'kubernetes.io/serviceAccount.name': 'web' });
    expect(told.line).toMatchObject({ level: 'info' });
    expect(told.line).not.toHaveProperty('warning');

    const untold = await publish('without-pod', {});
    expect(Object.keys(untold.options).filter((k) => k.startsWith('kubernetes.io/pod.'))).toEqual([]);
    expect(untold.line).toMatchObject({ level: 'warn', warning: expect.stringContaining('set podInfoOnMount: true in the CSIDriver object') });
  });
});
