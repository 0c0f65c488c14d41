import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type FlexPlannedVolume, type FlexPod, flexKubelet } from '../flex/helpers/in-use.js';
import { flexSession, mountOptions, podNamed } from '../helpers/flex-runner.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { attachedNodes, REBOOTS, REBOOTS_TIMEOUT, expectNodeClean, expectPodData, rebootNode, volumesInCatalog, writePodData } from '../helpers/reboot.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

/**
 * Reboot, FlexVolume side: a node with a block volume and a dir volume in use by two pods each (one
 * of them read-only) loses power: the kernel forgets every mount and loop device, the state dir (a
 * tmpfs) is empty. kubelet then tears everything down first, or (pods still scheduled here) runs
 * waitforattach, mountdevice and mount again at the same paths. Every call answers Success, every pod
 * sees its data, and once the volumes are deleted nothing of them is left. The same for an install
 * without attach, where twinvol attaches and stages by itself. test:long reboots the set-up-again
 * order 20 times in a row (2 in the short mode).
 */

const PLAN: FlexPlannedVolume[] = [
  { id: 'fblock', pv: 'pv-block', create: ['--size', '32Mi'] },
  { id: 'fdir', pv: 'pv-dir', create: ['--backend', 'dir', '--size', '32Mi'] },
];
/** Two pods per volume, the second reading only. */
const PODS: FlexPod[] = [{ uid: 'uid-1' }, { uid: 'uid-2', readonly: true }];
/** The pods that come after a teardown: new pods, new dirs. */
const LATER_PODS: FlexPod[] = [{ uid: 'uid-3' }, { uid: 'uid-4', readonly: true }];

let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

type Kubelet = ReturnType<typeof flexKubelet>;

/** Fresh data in every volume, written by its first read-write pod and synced; the checksum of each. */
function writeData(k: Kubelet, pods: FlexPod[]): Map<string, string> {
  const sums = new Map<string, string>();
  for (const v of PLAN) {
    const writer = k.views(v, pods).find((view) => !view.readonly);
    if (writer) sums.set(v.id, writePodData(writer));
  }
  execFileSync('sync');
  return sums;
}

function expectData(k: Kubelet, pods: FlexPod[], sums: Map<string, string>, label: string): void {
  for (const v of PLAN) for (const view of k.views(v, pods)) expectPodData(view, sums.get(v.id) ?? '', `${label}: ${v.id}`);
}

/** The normal end of the volumes' lives: nothing mounted, bound or recorded is left of them. */
async function deleteAll(k: Kubelet): Promise<void> {
  for (const v of PLAN) await k.delete(v);
  await expectNodeClean(s, 'after volume delete');
  expect(await volumesInCatalog(s)).toEqual([]);
}

describe('a reboot while volumes are in use (FlexVolume, attachable)', () => {
  // The pods are gone: the controller detaches, or (a new pod for the volume on this node) keeps it attached.
  for (const detached of [true, false]) {
    it(`teardown first, ${detached ? 'detached and attached again' : 'the attachment kept'}: every call answers Success; new pods see the data`, async () => {
      const k = flexKubelet(s);
      for (const v of PLAN) {
        await k.create(v);
        await k.setUp(v, PODS);
      }
      const sums = writeData(k, PODS);
      await rebootNode(s);

      for (const v of PLAN) {
        await k.unmount(v, PODS);
        await k.unmountDevice(v);
        if (detached) await k.detach(v);
      }
      for (const v of PLAN) expect(await attachedNodes(s, v.id), `${v.id} attachments`).toEqual(detached ? [] : ['node-a']);
      for (const v of PLAN) for (const view of k.views(v, PODS)) expect(existsSync(view.path), `${view.path} removed`).toBe(false);
      await expectNodeClean(s, 'after the teardown');

      for (const v of PLAN) {
        if (detached) await k.attach(v);
        await k.mountDevice(v);
        await k.mount(v, LATER_PODS);
      }
      expectData(k, LATER_PODS, sums, 'set up again after the teardown');
      for (const v of PLAN) await k.tearDown(v, LATER_PODS);
      await deleteAll(k);
    });
  }

  it(`set-up again without teardown (${REBOOTS} reboots): waitforattach, mountdevice and mount at the same paths bring the data back`, REBOOTS_TIMEOUT, async () => {
    const k = flexKubelet(s);
    for (const v of PLAN) {
      await k.create(v);
      await k.setUp(v, PODS);
    }
    let sums = writeData(k, PODS);
    for (let r = 1; r <= REBOOTS; r++) {
      await rebootNode(s);
      // The attachment is cluster state and outlives the node: kubelet goes straight to MountDevice.
      for (const v of PLAN) {
        await k.mountDevice(v);
        await k.mount(v, PODS);
      }
      expectData(k, PODS, sums, `after reboot ${r}`);
      sums = writeData(k, PODS);
    }
    for (const v of PLAN) await k.tearDown(v, PODS);
    await deleteAll(k);
  });
});

describe('a reboot while volumes are in use (FlexVolume without attach: twinvol attaches and stages itself)', () => {
  const { ok } = flexSession(() => s.env);
  const podDir = (v: FlexPlannedVolume, p: FlexPod) => podVolumeDir(s.kubeletDir, p.uid, v.pv);
  const mount = async (v: FlexPlannedVolume, pods: FlexPod[]) => {
    for (const p of pods) await ok('mount', podDir(v, p), mountOptions(v.pv, podNamed(p.uid), { volumeId: v.id, ...(p.readonly ? { 'kubernetes.io/readwrite': 'ro' } : {}) }));
  };
  const unmount = async (v: FlexPlannedVolume, pods: FlexPod[]) => {
    for (const p of pods) await ok('unmount', podDir(v, p));
  };

  async function inUse(k: Kubelet): Promise<Map<string, string>> {
    writeFileSync(s.env.TWINVOL_CONFIG ?? '', JSON.stringify({ flexAttach: false }));
    for (const v of PLAN) {
      await k.create(v);
      await mount(v, PODS);
    }
    return writeData(k, PODS);
  }

  it('teardown: unmount answers Success and releases the attachment its mount made, though the reboot took its records', async () => {
    const k = flexKubelet(s);
    await inUse(k);
    await rebootNode(s);
    for (const v of PLAN) await unmount(v, PODS);
    // No detach ever comes on such an install: an attachment left here would keep every other node out.
    for (const v of PLAN) expect(await attachedNodes(s, v.id), `${v.id} attachments`).toEqual([]);
    await deleteAll(k);
  });

  it(`set-up again without teardown (${REBOOTS} reboots): mount at the same paths brings the data back`, REBOOTS_TIMEOUT, async () => {
    const k = flexKubelet(s);
    let sums = await inUse(k);
    for (let r = 1; r <= REBOOTS; r++) {
      await rebootNode(s);
      for (const v of PLAN) await mount(v, PODS);
      expectData(k, PODS, sums, `after reboot ${r}`);
      sums = writeData(k, PODS);
    }
    for (const v of PLAN) await unmount(v, PODS);
    for (const v of PLAN) expect(await attachedNodes(s, v.id), `${v.id} attachments`).toEqual([]);
    await deleteAll(k);
  });
});
