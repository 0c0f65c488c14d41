// A rolling upgrade of the FlexVolume executable in kubelet's plugin dir: pods running on what one
// release attached and mounted are torn down by the other, and `twinvol status` of either finds the
// world the other made consistent. Both ways: an upgrade, and a rollback.
import { readFileSync, writeFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { flexOptions, flexSession, mountOptions, podNamed } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, mountsUnder, recordLeftovers, type Scratch } from '../helpers/scratch.js';
import { movesWithTool, PAIRS, type Release, SKIP_WHY, statusOf, suiteTitle, useReleases } from './releases.js';

let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const session = (r: Release) => flexSession(() => s.env, r.flex);

const MiB = 2 ** 20;
const problems = (r: Release) => statusOf(r, s.env);

/**
 * What the calls so far logged (<stateDir>/log/flex.log, one line a call): the tools they ran and
 * the system calls the mount addon made. No mount(8), umount(8) or losetup means the addon beside the
 * executable, whichever release built it, did every mount and loop device.
 */
function logged(): { tools: string[]; systemCalls: number } {
  const calls = readFileSync(join(s.stateDir, 'log/flex.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { spawns?: string[]; systemCalls?: string[] });
  return { tools: [...new Set(calls.flatMap((c) => (c.spawns ?? []).map((x) => x.split(':')[0] ?? '')))].sort(), systemCalls: calls.reduce((n, c) => n + (c.systemCalls?.length ?? 0), 0) };
}
const CONSISTENT = { exitCode: 0, problems: [], stderr: '' };

interface InUse {
  pv: string;
  global: string;
  dirs: string[];
}

/** kubelet and the controller-manager's attachable sequence: one pod read-write and, if asked, one read-only. */
async function attachAndMount(r: Release, id: string, readOnlyPod: boolean): Promise<InUse> {
  const { ok } = session(r);
  const pv = `pv-${id}`;
  const opts = flexOptions(pv, { volumeId: id });
  await ok('attach', opts, 'node-a');
  const wait = await ok('waitforattach', '', opts);
  const global = deviceMountPath(s.kubeletDir, pv);
  await ok('mountdevice', global, String(wait.reply.device ?? ''), opts);
  const dirs = [podVolumeDir(s.kubeletDir, `rw-${id}`, pv)];
  await ok('mount', dirs[0] ?? '', mountOptions(pv, podNamed(`rw-${id}`)));
  writeFileSync(join(dirs[0] ?? '', 'written'), r.name);
  if (readOnlyPod) {
    const ro = podVolumeDir(s.kubeletDir, `ro-${id}`, pv);
    await ok('mount', ro, mountOptions(pv, podNamed(`ro-${id}`), { 'kubernetes.io/readwrite': 'ro' }));
    dirs.push(ro);
  }
  return { pv, global, dirs };
}

async function unmountAndDetach(r: Release, v: InUse): Promise<void> {
  const { ok } = session(r);
  for (const d of v.dirs) await ok('unmount', d);
  await ok('unmountdevice', v.global);
  await ok('detach', v.pv, 'node-a');
}

const release = useReleases();

describe.skipIf(SKIP_WHY)(suiteTitle('FlexVolume executable across a rolling upgrade'), () => {
  for (const [fromName, toName] of PAIRS) {
    it(`${fromName} attaches and mounts dir and block volumes; ${toName} says it is consistent and tears it all down`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      await session(from).createVolume('blk', '--size', '16Mi');
      await session(from).createVolume('dv', '--backend', 'dir', '--size', '1Mi');
      const inUse = [await attachAndMount(from, 'blk', true), await attachAndMount(from, 'dv', true)];
      expect(await problems(to)).toEqual(CONSISTENT);
      for (const v of inUse) await unmountAndDetach(to, v);
      expect(mountsUnder(s.kubeletDir)).toEqual([]);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
      expect(recordLeftovers(s, 'blk')).toEqual([]);
      expect(await problems(to)).toEqual(CONSISTENT);
      expect(await problems(from)).toEqual(CONSISTENT);
      const { tools, systemCalls } = logged();
      const moved = [from, to].some(movesWithTool);
      expect(tools.filter((t) => ['mount', 'umount', 'losetup'].includes(t) && !(moved && t === 'mount'))).toEqual([]);
      expect(systemCalls).toBeGreaterThan(0);
    });

    it(`each call by the other release in turn, starting with ${fromName}; a read-only PV; repeats of mountdevice and mount`, async () => {
      const [a, b] = [release(fromName), release(toName)];
      const turn = (i: number) => session(i % 2 ? b : a).ok;
      await session(a).createVolume('alt', '--size', '16Mi');
      let i = 0;
      for (const [pv, rw] of [['pv-alt', 'rw'], ['pv-alt-ro', 'ro']] as const) {
        const opts = flexOptions(pv, { volumeId: 'alt' }, rw);
        await turn(i++)('attach', opts, 'node-a');
        const wait = await turn(i++)('waitforattach', '', opts);
        const global = deviceMountPath(s.kubeletDir, pv);
        for (let n = 0; n < 2; n++) await turn(i++)('mountdevice', global, String(wait.reply.device ?? ''), opts);
        const dir = podVolumeDir(s.kubeletDir, `pod-${pv}`, pv);
        for (let n = 0; n < 2; n++) await turn(i++)('mount', dir, mountOptions(pv, podNamed(`pod-${pv}`), { 'kubernetes.io/readwrite': rw }));
        expect(await problems(a)).toEqual(CONSISTENT);
        expect(await problems(b)).toEqual(CONSISTENT);
        await turn(i++)('unmount', dir);
        await turn(i++)('unmountdevice', global);
        await turn(i++)('detach', pv, 'node-a');
        expect(mountsUnder(s.kubeletDir)).toEqual([]);
        expect(await loopsLeftUnder(s.root)).toEqual([]);
      }
      expect(await problems(b)).toEqual(CONSISTENT);
    });

    it(`${toName} grows the image of an xfs volume ${fromName} mounted (expandvolume), ${fromName} its filesystem (expandfs)`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      await session(from).createVolume('gx', '--size', '320Mi', '--fs-type', 'xfs');
      const v = await attachAndMount(from, 'gx', false);
      const opts = flexOptions(v.pv, { volumeId: 'gx' });
      const dir = v.dirs[0] ?? '';
      const before = (await statfs(dir)).blocks;
      expect((await session(to).ok('expandvolume', opts, 'relative/path', String(640 * MiB), String(320 * MiB))).reply.volumeNewSize).toBe(640 * MiB);
      const device = mountAt(v.global)?.source ?? '';
      await session(from).ok('expandfs', opts, device, v.global, String(640 * MiB), String(320 * MiB));
      expect((await statfs(dir)).blocks).toBeGreaterThan(before * 1.8);
      expect(readFileSync(join(dir, 'written'), 'utf8')).toBe(from.name);
      await unmountAndDetach(to, v);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
      for (const r of [from, to]) expect(await problems(r)).toEqual(CONSISTENT);
    });

    it(`non-attachable install: ${fromName} mounts (an implicit staging), ${toName} unmounts and nothing is left`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      writeFileSync(s.env.TWINVOL_CONFIG ?? '', JSON.stringify({ flexAttach: false }));
      await session(from).createVolume('na-blk', '--size', '16Mi');
      await session(from).createVolume('na-dir', '--backend', 'dir', '--size', '1Mi');
      const dirs = [];
      for (const id of ['na-blk', 'na-dir']) {
        const pv = `pv-${id}`;
        const dir = podVolumeDir(s.kubeletDir, `pod-${id}`, pv);
        await session(from).ok('mount', dir, mountOptions(pv, podNamed(`pod-${id}`), { volumeId: id }));
        dirs.push(dir);
      }
      // The older release's status calls the implicit attachments' node unregistered (shared/core/inventory.ts no longer does).
      const judges = [from, to].filter((r) => r.executables === 'new');
      for (const r of judges) expect(await problems(r)).toEqual(CONSISTENT);
      for (const dir of dirs) await session(to).ok('unmount', dir);
      expect(mountsUnder(s.root)).toEqual([]);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
      expect(recordLeftovers(s, 'na-blk')).toEqual([]);
      for (const r of [from, to]) expect(await problems(r)).toEqual(CONSISTENT);
    });
  }
});
