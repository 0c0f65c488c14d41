import { describe, expect, it } from 'vitest';
import { registerNode } from '../../shared/core/nodes.js';
import { csiKubelet, type PlannedVolume, useRebootableCsi } from '../csi/helpers/in-use.js';
import { blockCap, mountCap } from '../csi/helpers/requests.js';
import { nid } from '../helpers/ids.js';
import { attachedNodes, expectNodeClean, expectPodData, type PodView, syncedPodData, volumesInCatalog } from '../helpers/reboot.js';
import { coreIn } from '../shared/core-scratch.js';

/**
 * Reboot while a volume is half set up, CSI side: staged but published to no pod (for a raw block
 * volume: its loop device bound), or attached (ControllerPublishVolume) but not staged. After the
 * reboot kubelet either tears down what is left (NodeUnstageVolume, ControllerUnpublishVolume) or
 * stages and publishes again; every call answers OK, the teardown leaves no fence (another node may
 * attach), the set-up brings the data back. test/reliability/reboot-half-flex.test.ts: FlexVolume.
 */
type Half = 'staged' | 'attached';
const HALVES: Half[] = ['staged', 'attached'];

describe('CSI: a reboot while volumes are half set up', () => {
  const PLAN: PlannedVolume[] = [
    { id: 'fs', backend: 'block', cap: mountCap('ext4'), uses: [{ pod: 'pod-1' }] },
    { id: 'raw', backend: 'block', cap: blockCap(), uses: [{ pod: 'pod-1' }] },
    { id: 'tree', backend: 'dir', cap: mountCap(), uses: [{ pod: 'pod-1' }] },
  ];
  const node = useRebootableCsi();

  async function halfSetUpThenReboot(half: Half): Promise<{ k: ReturnType<typeof csiKubelet>; sums: string[] }> {
    const k = csiKubelet(node.scratch(), node.server);
    for (const v of PLAN) {
      await k.create(v);
      await k.setUp(v);
    }
    const sums = syncedPodData(PLAN.map((v) => k.views(v)[0] as PodView));
    for (const v of PLAN) {
      await k.unpublish(v);
      if (half === 'attached') await k.unstage(v);
    }
    await node.reboot();
    return { k, sums };
  }

  for (const half of HALVES) {
    it(`${half}: the teardown left answers OK and frees the volumes for another node`, async () => {
      const { k } = await halfSetUpThenReboot(half);
      for (const v of PLAN) {
        if (half === 'staged') await k.unstage(v);
        await k.detach(v);
      }
      const s = node.scratch();
      await expectNodeClean(s, 'after the teardown');
      // node-b's server would register its node as it starts.
      await registerNode(coreIn(s, 'node-b'), nid('node-b'), {}, 'csi');
      for (const v of PLAN) {
        expect(await attachedNodes(s, v.id), `${v.id} attachments`).toEqual([]);
        await k.attach(v, 'node-b');
        await k.detach(v, 'node-b');
        await k.delete(v);
      }
      expect(await volumesInCatalog(s)).toEqual([]);
    });

    it(`${half}: stage and publish again bring the data back`, async () => {
      const { k, sums } = await halfSetUpThenReboot(half);
      for (const v of PLAN) {
        await k.stage(v);
        await k.publish(v);
      }
      PLAN.forEach((v, i) => expectPodData(k.views(v)[0] as PodView, sums[i] ?? '', `${half}: ${v.id}`));
      for (const v of PLAN) {
        await k.tearDown(v);
        await k.delete(v);
      }
      await expectNodeClean(node.scratch(), 'after DeleteVolume');
    });
  }
});
