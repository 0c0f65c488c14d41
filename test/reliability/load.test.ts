import { mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flexOptions, mountOptions, podNamed, runFlex } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { loopsLeftUnder, mountsUnder } from '../helpers/scratch.js';
import { outcome } from '../csi/helpers/client.js';
import { useCsiServer } from '../csi/helpers/fixture.js';
import { MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';

/**
 * Load: FlexVolume processes and CSI calls at once on overlapping volumes, for a while. FlexVolume
 * pods mount and unmount the volumes it staged; CSI pods publish and unpublish the same volumes from
 * the CSI staging, and read-only RPCs run beside them. Every reply must be valid and every call but
 * the documented ABORTED (a second call on an object in flight) succeed; at the end the state
 * converges to nothing mounted, and the server's memory has not grown without bound. Short mode:
 * 8 + 8 workers for 6 s; test:long: 64 + 64 for 3 minutes.
 */
const LONG = process.env.TWINVOL_LONG === '1';
const WORKERS = Number(process.env.TWINVOL_LOAD_WORKERS ?? (LONG ? 64 : 8));
const SECONDS = Number(process.env.TWINVOL_LOAD_SECONDS ?? (LONG ? 180 : 6));
const VOLUMES = ['load-0', 'load-1', 'load-2', 'load-3'];

const csi = useCsiServer({ nodeId: 'node-a' });
const cap = mountCap();
const rssKiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${csi.server.child.pid}/status`, 'utf8'))?.[1] ?? 0);

beforeAll(async () => {
  for (const id of VOLUMES) {
    await csi.ctl('CreateVolume', { name: id, volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
    mkdirSync(stagingPath(csi.s.kubeletDir, id), { recursive: true });
    await csi.node('NodeStageVolume', { volume_id: id, staging_target_path: stagingPath(csi.s.kubeletDir, id), volume_capability: cap });
    // The FlexVolume side stages the same volumes at its own global paths.
    const r = await runFlex(csi.s.env, ['mountdevice', deviceMountPath(csi.s.kubeletDir, `pv-${id}`), '', flexOptions(`pv-${id}`, { volumeId: id })]);
    expect(r.reply.status, r.output).toBe('Success');
  }
});
afterAll(async () => {
  for (const id of VOLUMES) {
    await runFlex(csi.s.env, ['unmountdevice', deviceMountPath(csi.s.kubeletDir, `pv-${id}`)]).catch(() => undefined);
    await csi.node('NodeUnstageVolume', { volume_id: id, staging_target_path: stagingPath(csi.s.kubeletDir, id) }).catch(() => undefined);
  }
});

describe(`load: ${WORKERS} FlexVolume and ${WORKERS} CSI workers for ${SECONDS} s on ${VOLUMES.length} shared volumes`, () => {
  it('every reply is valid, nothing is lost, state converges, memory stays bounded', { timeout: (SECONDS + 180) * 1000 }, async () => {
    const until = Date.now() + SECONDS * 1000;
    const wrong: string[] = [];
    let calls = 0;
    const rssBefore = rssKiB();
    // The server's RSS every 5 s while the load runs. Each of its two threads grows its heap for
    // a minute or so and then holds it (docs/benchmarks.md, "The service thread"): after 3 minutes
    // it has stood anywhere from 138 to 162 MiB, from 85, and a cap on that end value failed when it
    // happened to be read at the top. What a leak does is keep growing: so the last third of the run
    // may not climb far above the middle third.
    const rssSeries: number[] = [];
    const sampler = setInterval(() => rssSeries.push(rssKiB()), 5000);

    let starved = 0;
    /**
     * A FlexVolume call the way kubelet makes it: "try again" (the volume's lock stayed busy for the
     * call's whole wait) is an answer, and kubelet calls again; a mount is retried once, an unmount
     * until done, so the state converges however long the queue. Any other Failure is wrong.
     */
    const asKubelet = async (argv: string[], patienceMs: number) => {
      for (let giveUp = Date.now() + patienceMs; ; ) {
        const r = await runFlex(csi.s.env, argv);
        calls++;
        if (r.reply.status === 'Success') return;
        if (!/; try again$/.test(String(r.reply.message))) return void wrong.push(`flex ${argv[0]}: ${r.output}`);
        if (Date.now() >= giveUp) return void starved++;
      }
    };
    const flexWorker = async (w: number) => {
      for (let round = 0; Date.now() < until; round++) {
        const id = VOLUMES[(w + round) % VOLUMES.length] ?? '';
        const pod = `flex-${w}`;
        const dir = podVolumeDir(csi.s.kubeletDir, pod, `pv-${id}`);
        await asKubelet(['mount', dir, mountOptions(`pv-${id}`, podNamed(pod), { volumeId: id })], 0);
        await asKubelet(['unmount', dir], 600_000);
      }
    };
    /** A call the way the CO makes it: ABORTED (another call on the volume in flight) is retried with backoff. */
    const asCo = async (step: () => Promise<unknown>, patienceMs: number) => {
      let o = await outcome(step());
      calls++;
      for (let wait = 5, giveUp = Date.now() + patienceMs; o.code === 'ABORTED' && Date.now() < giveUp; wait = Math.min(wait * 2, 500)) {
        await new Promise((r) => setTimeout(r, wait * (0.5 + Math.random())));
        o = await outcome(step());
        calls++;
      }
      if (o.code === 'ABORTED') starved++;
      else if (o.code !== 'OK') wrong.push(`csi ${o.code} ${o.message}`);
      return o.code === 'OK';
    };
    const csiWorker = async (w: number) => {
      for (let round = 0; Date.now() < until; round++) {
        const id = VOLUMES[(w + round) % VOLUMES.length] ?? '';
        const target = targetPath(csi.s.kubeletDir, `csi-${w}`, id);
        mkdirSync(dirname(target), { recursive: true });
        const published = await asCo(() => csi.node('NodePublishVolume', { volume_id: id, staging_target_path: stagingPath(csi.s.kubeletDir, id), target_path: target, volume_capability: cap }), 10_000);
        await asCo(() => csi.ctl('ListVolumes', {}), 10_000);
        if (published) await asCo(() => csi.node('NodeGetVolumeStats', { volume_id: id, volume_path: target }), 10_000);
        // Unpublish is retried until done: the state must converge however long the queue.
        await asCo(() => csi.node('NodeUnpublishVolume', { volume_id: id, target_path: target }), 600_000);
      }
    };
    await Promise.all([...Array.from({ length: WORKERS }, (_, w) => flexWorker(w)), ...Array.from({ length: WORKERS }, (_, w) => csiWorker(w))]).finally(() => clearInterval(sampler));

    expect(wrong.slice(0, 5)).toEqual([]);
    expect(calls).toBeGreaterThan(WORKERS * 4);
    // Converged: only the two stagings per volume are mounted; every pod mount is gone.
    const pods = mountsUnder(csi.s.kubeletDir).filter((m) => m.includes('/pods/'));
    expect(pods).toEqual([]);
    expect(await loopsLeftUnder(csi.s.root)).toEqual([]);
    // Memory: the long mode's 3 minutes of calls must not grow the server without bound. A leak of
    // 8 KB per call, put into csi/rpc.ts to try this, climbed 84 MiB over the last minute; one of
    // 4 KB would climb about 42, over what this allows. A heap that holds still saws: with the service
    // thread's young generation capped (csi/service-thread.ts) one run held 143 MiB for 40 s and then
    // rose to 158 before the end, from a middle third whose highest was 153.
    const rssAfter = rssKiB();
    const third = Math.floor(rssSeries.length / 3);
    const middle = Math.max(...rssSeries.slice(third, 2 * third));
    const last = Math.max(...rssSeries.slice(2 * third));
    const mib = (kib: number) => Math.round(kib / 1024);
    console.log(`load: ${calls} calls in ${SECONDS} s, ${starved} given up on a busy lock (CSI: 10 s of ABORTED; FlexVolume: a mount's "try again"); server RSS ${mib(rssBefore)} MiB before, ${mib(rssAfter)} MiB after; every 5 s: ${rssSeries.map(mib).join(' ')}`);
    if (SECONDS >= 60) expect(last, 'the highest RSS of the last third of the run, against the middle third').toBeLessThan(middle * 1.1 + 16 * 1024);
  });
});
