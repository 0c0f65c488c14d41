import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCsiWorld, type World } from '../helpers/csi-world.js';
import { runCli } from '../helpers/flex-runner.js';
import { mountCap, stagingPath, targetPath } from '../csi/helpers/requests.js';
import type { JsonObject } from '../deploy/load.js';
import { only, planOf } from './plan-helpers.js';

/**
 * The PVs `migrate plan` writes for twinvol's own volumes, handed to a real twinvol-csi the way the
 * external-attacher and kubelet hand a PV's csi block to it (volume_id = volumeHandle, volume_context
 * = volumeAttributes, fs_type and readonly from the PV): the server takes them, and the pod sees the
 * data the volume held under FlexVolume. (Data written through FlexVolume and read back through CSI,
 * byte for byte, is `twinvol migrate verify`'s job: test/migrate/verify-*.)
 */
const world = useCsiWorld();

interface Csi {
  volumeHandle: string;
  fsType?: string;
  readOnly?: boolean;
  volumeAttributes?: Record<string, string>;
}

/** kubelet and the attacher, for one PV: publish, stage, publish into a pod; returns the pod's path and the teardown. */
async function mountPv(w: World, pvName: string, csi: Csi, podUid: string) {
  const cap = mountCap(csi.fsType ?? '');
  const context = csi.volumeAttributes ?? {};
  const readonly = csi.readOnly ?? false;
  const id = csi.volumeHandle;
  const staging = stagingPath(w.s.kubeletDir, id);
  const target = targetPath(w.s.kubeletDir, podUid, pvName);
  mkdirSync(staging, { recursive: true });
  mkdirSync(dirname(target), { recursive: true });
  const published = await w.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap, readonly, volume_context: context });
  await w.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap, publish_context: published.publish_context, volume_context: context });
  await w.node('NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: cap, readonly, publish_context: published.publish_context, volume_context: context });
  return {
    target,
    async release() {
      await w.node('NodeUnpublishVolume', { volume_id: id, target_path: target });
      await w.node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
      await w.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    },
  };
}

const flexPv = (name: string, options: Record<string, string>, fsType = '') => ({
  apiVersion: 'v1',
  kind: 'PersistentVolume',
  metadata: { name },
  spec: { capacity: { storage: '16Mi' }, accessModes: ['ReadWriteOnce'], flexVolume: { driver: 'acme/twinvol', fsType, options } },
});

describe("migrate plan's PVs of twinvol volumes, served by twinvol-csi", () => {
  it('a dir volume and a block volume: the server takes each planned PV as it is, and the pod sees the same data', async () => {
    const w = await world();
    for (const args of [['create', 'mig-dir', '--backend', 'dir', '--size', '16Mi'], ['create', 'mig-block', '--size', '16Mi', '--fs-type', 'ext4']]) {
      const r = await runCli(w.s.env, args);
      expect(r.stderr).toBe('');
    }
    // The dir volume's data, as FlexVolume left it, and a PV that names the block volume only by its PV name.
    writeFileSync(join(w.s.dataRoot, 'volumes/mig-dir/data/hello.txt'), 'written under FlexVolume\n');
    const input = [flexPv('web-data', { volumeId: 'mig-dir', backend: 'dir' }), flexPv('mig-block', { backend: 'block' }, 'ext4')];
    const plan = planOf({ files: ['-'] }, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: input }));
    expect(plan.exitCode).toBe(0);
    const csiOf = (name: string) => (only(plan.docs, 'PersistentVolume', name).spec as JsonObject).csi as unknown as Csi;
    expect(csiOf('web-data')).toEqual({ driver: 'csi.twinvol.io', volumeHandle: 'mig-dir', volumeAttributes: { backend: 'dir' } });
    expect(csiOf('mig-block')).toEqual({ driver: 'csi.twinvol.io', volumeHandle: 'mig-block', fsType: 'ext4', volumeAttributes: { backend: 'block' } });

    const dir = await mountPv(w, 'web-data', csiOf('web-data'), 'pod-1');
    expect(readFileSync(join(dir.target, 'hello.txt'), 'utf8')).toBe('written under FlexVolume\n');
    await dir.release();

    const block = await mountPv(w, 'mig-block', csiOf('mig-block'), 'pod-2');
    writeFileSync(join(block.target, 'through-csi.txt'), 'ok\n');
    expect(readFileSync(join(block.target, 'through-csi.txt'), 'utf8')).toBe('ok\n');
    await block.release();
  });

  it('a volumeAttribute that contradicts the catalog is refused: the attributes the plan copies are checked there', async () => {
    const w = await world();
    expect((await runCli(w.s.env, ['create', 'mig-other', '--backend', 'dir', '--size', '16Mi'])).stderr).toBe('');
    const plan = planOf({ files: ['-'] }, JSON.stringify(flexPv('wrong', { volumeId: 'mig-other', backend: 'block' })));
    const csi = (only(plan.docs, 'PersistentVolume', 'wrong').spec as JsonObject).csi as unknown as Csi;
    await expect(mountPv(w, 'wrong', csi, 'pod-3')).rejects.toThrow(/backend.*does not match volume mig-other/);
  });
});
