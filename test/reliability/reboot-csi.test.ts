import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { csiKubelet, expectOk, type PlannedVolume, useRebootableCsi } from '../csi/helpers/in-use.js';
import { blockCap, mountCap, targetPath } from '../csi/helpers/requests.js';
import { attachedNodes, REBOOTS, REBOOTS_TIMEOUT, expectNodeClean, expectPodData, volumesInCatalog, writePodData } from '../helpers/reboot.js';

/**
 * Reboot, CSI side: a node with several volumes in use at once loses power. The server dies with
 * SIGKILL, the kernel forgets every mount and loop device, the state dir (a tmpfs) is empty; a new
 * server starts on the same data root and kubelet dir. Then kubelet does one of the two things it
 * really does after a reboot: tear everything down first, or (pods still scheduled here) stage and
 * publish again at the same paths without a teardown. Every call answers OK, every pod sees its data,
 * and once the volumes are deleted nothing of them is left. test:long reboots the set-up-again order
 * 20 times in a row (2 in the short mode).
 */

/** Every kind of use at once: ext4 with a writer and a read-only reader on one staging, raw block, a dir shared by two pods. */
const PLAN: PlannedVolume[] = [
  { id: 'fs', backend: 'block', cap: mountCap('ext4'), uses: [{ pod: 'pod-1' }, { pod: 'pod-2', readonly: true }] },
  { id: 'raw', backend: 'block', cap: blockCap(), uses: [{ pod: 'pod-1' }] },
  { id: 'tree', backend: 'dir', cap: mountCap(), uses: [{ pod: 'pod-1' }, { pod: 'pod-3' }] },
];

const node = useRebootableCsi();
const { reboot } = node;

type Kubelet = ReturnType<typeof csiKubelet>;

/** Fresh data in every volume, written by its first read-write pod and synced; the checksum of each. */
function writeData(k: Kubelet): Map<string, string> {
  const sums = new Map<string, string>();
  for (const v of PLAN) {
    const writer = k.views(v).find((view) => !view.readonly);
    if (writer) sums.set(v.id, writePodData(writer));
  }
  execFileSync('sync');
  return sums;
}

function expectData(k: Kubelet, sums: Map<string, string>, label: string): void {
  for (const v of PLAN) for (const view of k.views(v)) expectPodData(view, sums.get(v.id) ?? '', `${label}: ${v.id}`);
}

/** Every volume made and in use by its pods, with data. */
async function volumesInUse(k: Kubelet): Promise<Map<string, string>> {
  for (const v of PLAN) {
    await k.create(v);
    await k.setUp(v);
  }
  return writeData(k);
}

/** The normal end of the volumes' lives: nothing mounted, bound or recorded is left of them. */
async function tearDownAndDelete(k: Kubelet): Promise<void> {
  for (const v of PLAN) await k.tearDown(v);
  for (const v of PLAN) await k.delete(v);
  await expectNodeClean(node.scratch(), 'after DeleteVolume');
  expect(await volumesInCatalog(node.scratch())).toEqual([]);
}

describe('a reboot while volumes are in use (CSI)', () => {
  it('teardown first: every unpublish, unstage and controller unpublish answers OK; a new set-up brings the data back', async () => {
    const k = csiKubelet(node.scratch(), node.server);
    const sums = await volumesInUse(k);
    await reboot();

    for (const v of PLAN) await k.tearDown(v);
    // No fence is left behind: the unstage after the reboot cleared the node's mark.
    for (const v of PLAN) expect(await attachedNodes(node.scratch(), v.id), `${v.id} attachments`).toEqual([]);
    for (const v of PLAN) for (const view of k.views(v)) expect(existsSync(view.path), `${view.path} removed`).toBe(false);
    await expectNodeClean(node.scratch(), 'after the teardown');

    for (const v of PLAN) await k.setUp(v);
    expectData(k, sums, 'set up again after the teardown');
    await tearDownAndDelete(k);
  });

  it(`set-up again without teardown (${REBOOTS} reboots): stage and publish at the same paths answer OK and bring the data back`, REBOOTS_TIMEOUT, async () => {
    const k = csiKubelet(node.scratch(), node.server);
    let sums = await volumesInUse(k);
    for (let r = 1; r <= REBOOTS; r++) {
      await reboot();
      for (const v of PLAN) {
        await k.stage(v);
        await k.publish(v);
      }
      expectData(k, sums, `after reboot ${r}`);
      sums = writeData(k);
    }
    await tearDownAndDelete(k);
  });
});

describe('a reboot while an inline (ephemeral) volume is in use', () => {
  // kubelet's volume_id for an inline volume, and the marker it puts in volume_context.
  const id = 'csi-0f3c9a';
  const view = () => ({ path: targetPath(node.scratch().kubeletDir, 'pod-1', id) });
  const publish = () => {
    mkdirSync(dirname(view().path), { recursive: true });
    const context = { 'csi.storage.k8s.io/ephemeral': 'true', backend: 'block', size: '32Mi' };
    return expectOk('NodePublishVolume inline', node.server().client.call('Node', 'NodePublishVolume', { volume_id: id, target_path: view().path, volume_capability: mountCap(), volume_context: context }));
  };
  const unpublish = () => expectOk('NodeUnpublishVolume inline', node.server().client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: view().path }));

  it('teardown: NodeUnpublishVolume answers OK and the volume goes with its pod, though the reboot took its records', async () => {
    await publish();
    writePodData(view());
    await reboot();
    await unpublish();
    await expectNodeClean(node.scratch(), 'after the unpublish');
    expect(await volumesInCatalog(node.scratch())).toEqual([]);
  });

  it(`set-up again without teardown (${REBOOTS} reboots): NodePublishVolume at the same target brings the data back`, REBOOTS_TIMEOUT, async () => {
    await publish();
    let sum = writePodData(view());
    for (let r = 1; r <= REBOOTS; r++) {
      await reboot();
      await publish();
      expectPodData(view(), sum, `after reboot ${r}`);
      sum = writePodData(view());
    }
    await unpublish();
    await expectNodeClean(node.scratch(), 'after the unpublish');
    expect(await volumesInCatalog(node.scratch())).toEqual([]);
  });
});
