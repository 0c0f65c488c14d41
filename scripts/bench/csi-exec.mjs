// The exec backend's rows: what the CSI server adds around a third-party FlexVolume driver. A small
// shell driver (scripts/bench/flex-bind-driver.sh) serves exec volumes through the CSI server; the
// reference is the same driver's own calls, run directly from this process as kubelet would run
// them: `mount <target> <options>` for NodePublishVolume, `unmount <target>` for NodeUnpublishVolume
// (its init runs once, and stage, stats and the controller RPCs call no driver).
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { interleaved, launch, lifecycle, makeScratch, median, progress, row } from './lib.mjs';

const run = promisify(execFile);
const REF = "the driver's own calls, run directly";

/** Installs the bench driver where the server's --flex-plugin-dir looks for `twinvol-bench/bind`. */
function installDriver(scratch) {
  const dir = join(scratch.pluginDir, 'twinvol-bench~bind');
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(import.meta.dirname, 'flex-bind-driver.sh'), join(dir, 'bind'));
  return join(dir, 'bind');
}

export const suite = {
  title: 'CSI exec backend',
  order: 25,
  async run({ short }) {
    const s = makeScratch('exec');
    let server;
    try {
      const driver = installDriver(s);
      server = await launch('twinvol', s, 'twinvol');
      for (let i = 0; i < 3; i++) await lifecycle(server, s, 'exec', `warm-${i}`);
      const timings = {};
      let n = 0;
      const direct = { mount: [], unmount: [] };
      // One lifecycle's driver calls, run directly: a fresh target each time, as a pod's is.
      const byHand = async () => {
        const target = join(s.kubeletDir, 'direct', `pod-${n++}`, 'mount');
        const t0 = performance.now();
        await run(driver, ['mount', target, JSON.stringify({ 'kubernetes.io/fsType': '', 'kubernetes.io/readwrite': 'rw' })], { env: s.env });
        const t1 = performance.now();
        await run(driver, ['unmount', target], { env: s.env });
        const t2 = performance.now();
        // The reference must do the work it stands for: its unmount once left the bind in place.
        if (await run('mountpoint', ['-q', target]).then(() => true, () => false)) throw new Error(`the bench driver left ${target} mounted`);
        direct.mount.push(t1 - t0);
        direct.unmount.push(t2 - t1);
        return t2 - t0;
      };
      const rounds = short ? 2 : 40;
      progress(`CSI exec backend: ${rounds} interleaved exec lifecycles and direct driver calls`);
      const [lives, refs] = await interleaved([() => lifecycle(server, s, 'exec', `e-${n++}`, timings), byHand], rounds);
      // interleaved makes one unmeasured call of each contender first: the per-call samples begin with it.
      const measured = (xs) => median(xs.slice(1));
      return [
        row('exec.lifecycle', 'CSI exec: node lifecycle, shell FlexVolume driver (9 RPCs)', median(lives), 'ms', median(refs), `${REF} (mount, unmount)`),
        row('exec.rpc.NodePublishVolume.p50', 'CSI exec: NodePublishVolume p50', measured(timings.NodePublishVolume), 'ms', measured(direct.mount), `${REF} (mount)`),
        row('exec.rpc.NodeUnpublishVolume.p50', 'CSI exec: NodeUnpublishVolume p50', measured(timings.NodeUnpublishVolume), 'ms', measured(direct.unmount), `${REF} (unmount)`),
      ];
    } finally {
      await server?.stop();
      s.cleanup();
    }
  },
};
