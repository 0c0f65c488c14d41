import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type FlexPlannedVolume, type FlexPod, flexKubelet } from '../flex/helpers/in-use.js';
import { attachedNodes, expectNodeClean, expectPodData, type PodView, rebootNode, syncedPodData, volumesInCatalog } from '../helpers/reboot.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

/**
 * Reboot while a volume is half set up, FlexVolume side: mountdevice done but mounted in no pod, or
 * attached with waitforattach done (a block volume's loop device bound) but no mountdevice. After the
 * reboot kubelet either tears down what is left (unmountdevice, detach) or runs waitforattach,
 * mountdevice and mount again; every call answers Success, the teardown leaves no fence (another node
 * may attach), the set-up brings the data back. test/reliability/reboot-half-csi.test.ts: CSI.
 */
type Half = 'staged' | 'attached';
const HALVES: Half[] = ['staged', 'attached'];

describe('FlexVolume: a reboot while volumes are half set up', () => {
  const PLAN: FlexPlannedVolume[] = [
    { id: 'fblock', pv: 'pv-block', create: ['--size', '32Mi'] },
    { id: 'fdir', pv: 'pv-dir', create: ['--backend', 'dir', '--size', '32Mi'] },
  ];
  const PODS: FlexPod[] = [{ uid: 'uid-1' }];
  let s: Scratch;
  beforeEach(() => {
    s = createScratch('node-a');
  });
  afterEach(() => s.cleanup());

  async function halfSetUpThenReboot(half: Half): Promise<{ k: ReturnType<typeof flexKubelet>; sums: string[] }> {
    const k = flexKubelet(s);
    for (const v of PLAN) {
      await k.create(v);
      await k.setUp(v, PODS);
    }
    const sums = syncedPodData(PLAN.map((v) => k.views(v, PODS)[0] as PodView));
    for (const v of PLAN) {
      await k.unmount(v, PODS);
      if (half === 'attached') {
        await k.unmountDevice(v);
        // The device is made again for a MountDevice that never came: the reboot takes it.
        await k.waitForAttach(v);
      }
    }
    await rebootNode(s);
    return { k, sums };
  }

  for (const half of HALVES) {
    it(`${half}: the teardown left answers Success and frees the volumes for another node`, async () => {
      const { k } = await halfSetUpThenReboot(half);
      for (const v of PLAN) {
        if (half === 'staged') await k.unmountDevice(v);
        await k.detach(v);
      }
      await expectNodeClean(s, 'after the teardown');
      for (const v of PLAN) {
        expect(await attachedNodes(s, v.id), `${v.id} attachments`).toEqual([]);
        await k.attach(v, 'node-b');
        await k.detach(v, 'node-b');
        await k.delete(v);
      }
      expect(await volumesInCatalog(s)).toEqual([]);
    });

    it(`${half}: waitforattach, mountdevice and mount again bring the data back`, async () => {
      const { k, sums } = await halfSetUpThenReboot(half);
      for (const v of PLAN) {
        await k.mountDevice(v);
        await k.mount(v, PODS);
      }
      PLAN.forEach((v, i) => expectPodData(k.views(v, PODS)[0] as PodView, sums[i] ?? '', `${half}: ${v.id}`));
      for (const v of PLAN) {
        await k.tearDown(v, PODS);
        await k.delete(v);
      }
      await expectNodeClean(s, 'after volume delete');
    });
  }
});
