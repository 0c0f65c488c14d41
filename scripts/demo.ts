// The main job (issue 10, item 4): a block volume and a dir volume written under FlexVolume, the move
// to CSI planned by `twinvol migrate plan`, proved by `twinvol migrate verify`, done (the pod comes
// back on the planned CSI PV and finds its data), then both models compared by `twinvol compare`.
// Everything happens in a scratch directory that is removed afterwards, mounts and loop devices too,
// also when SIGINT (Ctrl-C) or SIGTERM stops it half way: then it exits 130 or 143.
//   npm run demo
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { csiGlobalMountPath, csiPodMountPath } from '../shared/index.js';
import { type Interrupt, onInterrupt, signalExitCode } from '../flex/interrupt.js';
import { loopsUnder, mountsUnder, releaseWorld, worldIn } from '../flex/scratch-world.js';
import { CsiDriver, mountCapability } from './demo/csi-steps.js';
import { FlexDriver } from './demo/flex-steps.js';
import { clusterObjects, plannedHandles, show, twinvol, verifyStep } from './demo/migrate-steps.js';
import { heading, printStep } from './demo/report.js';

const NODE = 'demo-node';
const VOLUMES = [
  { id: 'demo-block', args: ['--size', '32Mi'], size: '32Mi', fsType: 'ext4' },
  { id: 'demo-dir', args: ['--backend', 'dir', '--size', '16Mi'], size: '16Mi', fsType: '' },
] as const;

/** What the pod wrote: a text file, 256 KiB of binary whose bytes follow from their offset, a nested file. */
function podFiles(volumeId: string): Record<string, Buffer> {
  const blob = Buffer.alloc(256 * 1024);
  for (let i = 0; i < blob.length; i++) blob[i] = (i * 131 + (i >> 8)) & 0xff;
  return {
    'hello.txt': Buffer.from(`written under FlexVolume into ${volumeId} at ${new Date().toISOString()}\n`),
    'data.bin': blob,
    'conf/app.conf': Buffer.from('mode=migrated\n'),
  };
}

async function main(interrupt: Interrupt): Promise<number> {
  const signal = interrupt.signal;
  const started = performance.now();
  const scratch = worldIn(mkdtempSync('/tmp/twinvol-demo-'), NODE);
  const flexBin = join(__dirname, 'flex/twinvol');
  const csiBin = join(__dirname, 'csi/twinvol-csi');
  process.stdout.write(`twinvol demo: moving two volumes from FlexVolume to CSI in a scratch world, ${scratch.root}\n`);
  try {
    const flex = new FlexDriver(flexBin, scratch, signal);
    const written = new Map<string, Map<string, string>>();

    heading('1. FlexVolume: the administrator creates a block and a dir volume; kubelet gives a pod each; the pod writes');
    for (const v of VOLUMES) {
      await flex.admin(['create', v.id, ...v.args]);
      const where = await flex.attachAndMount(v.id, `pv-${v.id}`, 'pod-uid-1', NODE, v.fsType);
      const sums = new Map<string, string>();
      for (const [name, content] of Object.entries(podFiles(v.id))) {
        mkdirSync(join(where.podDir, name, '..'), { recursive: true });
        writeFileSync(join(where.podDir, name), content);
        sums.set(name, sha256(content));
      }
      written.set(v.id, sums);
      printStep({ model: 'host', call: `the pod writes ${sums.size} files`, outcome: 'ok', detail: [...sums].map(([n, s]) => `${n} ${s.slice(0, 8)}`).join(', ') });
      await flex.unmountAndDetach(`pv-${v.id}`, NODE, where);
    }

    heading("2. Plan: twinvol migrate plan reads the cluster's objects (kubectl get pv,pvc,deploy -o yaml) and writes the CSI ones");
    const cluster = join(scratch.root, 'cluster.yaml');
    writeFileSync(cluster, clusterObjects(VOLUMES));
    const planDir = join(scratch.root, 'plan');
    const plan = await twinvol(flexBin, scratch, ['migrate', 'plan', cluster, '--out', planDir], signal);
    printStep({ model: 'host', call: 'twinvol migrate plan --out plan/', outcome: `exit ${plan.code}`, ms: plan.ms });
    show(plan.stderr + plan.stdout);
    if (plan.code !== 0) throw new Error('migrate plan did not plan every volume');
    const manifests = join(planDir, 'manifests');
    const handles = plannedHandles(readdirSync(manifests).map((f) => readFileSync(join(manifests, f), 'utf8')).join('\n---\n'));
    for (const [pv, h] of handles) printStep({ model: 'host', call: `planned PV ${pv}`, outcome: h.driver, detail: `volumeHandle ${h.handle}` });

    heading('3. Verify: each volume brought up through FlexVolume, then CSI, then FlexVolume again; checksums compared');
    for (const v of VOLUMES) await verifyStep(flexBin, scratch, v.id, signal);

    heading('4. Moved: the pod comes back on the planned CSI PVs (the sidecars and kubelet call twinvol-csi) and finds its data');
    const csi = await CsiDriver.start(csiBin, scratch, NODE, signal);
    try {
      for (const v of VOLUMES) {
        const handle = handles.get(`pv-${v.id}`)?.handle;
        if (!handle) throw new Error(`the plan has no CSI PV for pv-${v.id}`);
        const cap = mountCapability(v.fsType);
        const staging = csiGlobalMountPath(scratch.kubeletDir, handle);
        const target = csiPodMountPath(scratch.kubeletDir, 'pod-uid-2', `pv-${v.id}`);
        await csi.call('Controller', 'ControllerPublishVolume', { volume_id: handle, node_id: NODE, volume_capability: cap }, 'OK', handle);
        mkdirSync(staging, { recursive: true });
        await csi.call('Node', 'NodeStageVolume', { volume_id: handle, staging_target_path: staging, volume_capability: cap });
        await csi.call('Node', 'NodePublishVolume', { volume_id: handle, staging_target_path: staging, target_path: target, volume_capability: cap });
        const sums = written.get(v.id) ?? new Map<string, string>();
        const differ = [...sums].filter(([name, sum]) => sha256(readFileSync(join(target, name))) !== sum).map(([name]) => name);
        printStep({ model: 'host', call: `the pod reads its ${sums.size} files`, outcome: differ.length ? 'DIFFERENT' : 'same', detail: differ.length ? differ.join(', ') : 'sha256 as written under FlexVolume' });
        if (differ.length) throw new Error(`${v.id}: ${differ.join(', ')} read back different through CSI`);
        await csi.call('Node', 'NodeUnpublishVolume', { volume_id: handle, target_path: target });
        await csi.call('Node', 'NodeUnstageVolume', { volume_id: handle, staging_target_path: staging });
        await csi.call('Controller', 'ControllerUnpublishVolume', { volume_id: handle, node_id: NODE });
      }
    } finally {
      await csi.stop();
    }

    heading('5. The two models side by side on the same work: twinvol compare --backend block --rounds 1');
    const compare = await twinvol(flexBin, scratch, ['compare', '--backend', 'block', '--rounds', '1'], signal);
    if (compare.code === 2) throw new Error(`twinvol compare refused its command line: ${compare.stderr.trim()}`);
    show(compare.stdout);
    if (compare.code !== 0) printStep({ model: 'host', call: 'twinvol compare', outcome: `exit ${compare.code}`, detail: compare.stderr.trim().split('\n')[0] ?? '' });

    heading('6. Nothing left behind on the node');
    check(mountsUnder(scratch.root).length === 0, `mounts left: ${mountsUnder(scratch.root).join(', ')}`);
    check(loopsUnder(scratch.root).length === 0, `loop devices left: ${loopsUnder(scratch.root).join(', ')}`);
    printStep({ model: 'host', call: 'mounts and loop devices under scratch', outcome: 'none' });
    process.stdout.write(`\ndemo passed in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
    return 0;
  } catch (err) {
    // Stopped by a signal: what failed is only the step the signal cut short, not worth a line.
    if (!interrupt.received) process.stderr.write(`\ndemo FAILED: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await releaseWorld(scratch.root);
    const sig = interrupt.received;
    if (sig) process.stderr.write(`\ndemo interrupted by ${sig}: stopped the processes it had started, unmounted, detached its loop devices and removed ${scratch.root}\n`);
    else process.stdout.write(`cleaned up ${scratch.root}\n`);
  }
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
}

const interrupt = onInterrupt();
main(interrupt).then(
  (code) => process.exit(interrupt.received ? signalExitCode(interrupt.received) : code),
  (err: unknown) => {
    // releaseWorld refuses to remove a tree with a mount left in it: say so rather than a trace.
    process.stderr.write(`demo FAILED: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
