import { expect } from 'vitest';
import { flexOptions, flexSession, mountOptions, podNamed, runCli } from '../../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../../helpers/kubelet-paths.js';
import type { PodView } from '../../helpers/reboot.js';
import type { Scratch } from '../../helpers/scratch.js';

/** One pod's use of a volume, read-write unless `readonly` (kubernetes.io/readwrite: ro). */
export interface FlexPod {
  uid: string;
  readonly?: boolean;
}

/** A volume the administrator made, named by one PV, as a test plans its use. */
export interface FlexPlannedVolume {
  id: string;
  pv: string;
  /** `twinvol volume create` flags. */
  create: string[];
}

/**
 * The calls kubelet and the controller-manager make for planned volumes on node-a through the
 * FlexVolume executable, at the paths kubelet uses: the device mount path of the PV, a dir per pod.
 */
export function flexKubelet(s: Scratch) {
  const { ok } = flexSession(() => s.env);
  const opts = (v: FlexPlannedVolume) => flexOptions(v.pv, { volumeId: v.id });
  const global = (v: FlexPlannedVolume) => deviceMountPath(s.kubeletDir, v.pv);
  const podDir = (v: FlexPlannedVolume, p: FlexPod) => podVolumeDir(s.kubeletDir, p.uid, v.pv);
  const k = {
    global,
    views: (v: FlexPlannedVolume, pods: FlexPod[]): PodView[] => pods.map((p) => ({ path: podDir(v, p), readonly: Boolean(p.readonly) })),
    async create(v: FlexPlannedVolume) {
      const r = await runCli(s.env, ['create', v.id, ...v.create]);
      expect(r, r.stderr).toMatchObject({ exitCode: 0, stderr: '' });
    },
    async delete(v: FlexPlannedVolume) {
      const r = await runCli(s.env, ['delete', v.id]);
      expect(r, r.stderr).toMatchObject({ exitCode: 0, stderr: '' });
    },
    attach: (v: FlexPlannedVolume, node = 'node-a') => ok('attach', opts(v), node),
    /** The device kubelet's MountDevice waits for (a loop device for block volumes, '' for dir). */
    waitForAttach: async (v: FlexPlannedVolume) => String((await ok('waitforattach', '', opts(v))).reply.device ?? ''),
    /** waitforattach then mountdevice with the device it answered, as kubelet's MountDevice does. */
    mountDevice: async (v: FlexPlannedVolume) => ok('mountdevice', global(v), await k.waitForAttach(v), opts(v)),
    async mount(v: FlexPlannedVolume, pods: FlexPod[]) {
      for (const p of pods) await ok('mount', podDir(v, p), mountOptions(v.pv, podNamed(p.uid), p.readonly ? { 'kubernetes.io/readwrite': 'ro' } : {}));
    },
    async unmount(v: FlexPlannedVolume, pods: FlexPod[]) {
      for (const p of pods) await ok('unmount', podDir(v, p));
    },
    unmountDevice: (v: FlexPlannedVolume) => ok('unmountdevice', global(v)),
    detach: (v: FlexPlannedVolume, node = 'node-a') => ok('detach', v.pv, node),
    async setUp(v: FlexPlannedVolume, pods: FlexPod[]) {
      await k.attach(v);
      await k.mountDevice(v);
      await k.mount(v, pods);
    },
    async tearDown(v: FlexPlannedVolume, pods: FlexPod[]) {
      await k.unmount(v, pods);
      await k.unmountDevice(v);
      await k.detach(v);
    },
  };
  return k;
}
