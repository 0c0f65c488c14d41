// The main job: one volume's whole life through both plugin models, on loop devices in a scratch
// directory that is removed afterwards (mounts and loop devices included, even on failure).
//   npm run demo
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createScratch, loopsUnder, mountsUnder } from '../test/helpers/scratch.js';
import { CsiDriver, mountCapability } from './demo/csi-steps.js';
import { FlexDriver, flexOptions } from './demo/flex-steps.js';
import { heading, printStep } from './demo/report.js';

const NODE = 'demo-node';

async function main(): Promise<number> {
  const scratch = createScratch(NODE, '/tmp/twinvol-demo-');
  const flexBin = join(__dirname, 'flex/twinvol');
  process.stdout.write(`twinvol demo: scratch world ${scratch.root}\n`);
  try {
    const flex = new FlexDriver(flexBin, scratch);

    heading('1. FlexVolume: the administrator creates a volume, kubelet runs the attachable lifecycle');
    await flex.admin(['create', 'demo-vol', '--size', '256Mi']);
    const first = await flex.attachAndMount('demo-vol', 'pv-demo', 'pod-uid-1', NODE);
    const payload = `written under FlexVolume at ${new Date().toISOString()}\n`;
    writeFileSync(join(first.podDir, 'hello.txt'), payload);
    const sum = sha256(payload);
    printStep({ model: 'host', call: 'write hello.txt in the pod dir', outcome: 'ok', detail: `sha256 ${sum.slice(0, 16)}...` });
    await flex.unmountAndDetach('pv-demo', NODE, first);

    heading('2. FlexVolume again: a new pod finds the same data');
    const second = await flex.attachAndMount('demo-vol', 'pv-demo', 'pod-uid-2', NODE);
    const readBack = readFileSync(join(second.podDir, 'hello.txt'), 'utf8');
    check(sha256(readBack) === sum, 'data read back under FlexVolume differs from what was written');
    printStep({ model: 'host', call: 'read hello.txt in the new pod', outcome: 'same', detail: `sha256 ${sum.slice(0, 16)}...` });
    await flex.unmountAndDetach('pv-demo', NODE, second);

    const csi = await CsiDriver.start(join(__dirname, 'csi/twinvol-csi'), scratch, NODE);
    try {
      heading('3. CSI: the same volume, published through the CSI server, holds the same data');
      const cap = mountCapability('ext4');
      const staging = join(scratch.kubeletDir, 'plugins/kubernetes.io/csi/csi.twinvol.io/demo/globalmount');
      const target = join(scratch.kubeletDir, 'pods/pod-uid-3/volumes/kubernetes.io~csi/pv-demo/mount');
      await csi.call('Controller', 'ControllerPublishVolume', { volume_id: 'demo-vol', node_id: NODE, volume_capability: cap });
      mkdirSync(staging, { recursive: true });
      await csi.call('Node', 'NodeStageVolume', { volume_id: 'demo-vol', staging_target_path: staging, volume_capability: cap });
      await csi.call('Node', 'NodePublishVolume', { volume_id: 'demo-vol', staging_target_path: staging, target_path: target, volume_capability: cap });
      check(sha256(readFileSync(join(target, 'hello.txt'), 'utf8')) === sum, 'data read through CSI differs from what FlexVolume wrote');
      printStep({ model: 'host', call: 'read hello.txt in the CSI target', outcome: 'same', detail: `sha256 ${sum.slice(0, 16)}...` });
      const stats = await csi.call('Node', 'NodeGetVolumeStats', { volume_id: 'demo-vol', volume_path: target });
      const bytes = (stats.usage as { unit: string; total: string }[] | undefined)?.find((u) => u.unit === 'BYTES');
      printStep({ model: 'host', call: 'filesystem size reported', outcome: `${Math.round(Number(bytes?.total ?? 0) / 2 ** 20)} MiB` });

      heading('4. One catalog, one owner: FlexVolume cannot attach it to a second node while CSI holds it');
      await flex.call(['attach', flexOptions('demo-vol', 'pv-demo'), 'other-node'], 'attach (to other-node)', 'Failure');

      await csi.call('Node', 'NodeUnpublishVolume', { volume_id: 'demo-vol', target_path: target });
      await csi.call('Node', 'NodeUnstageVolume', { volume_id: 'demo-vol', staging_target_path: staging });
      await csi.call('Controller', 'ControllerUnpublishVolume', { volume_id: 'demo-vol', node_id: NODE });

      heading('5. CSI provisions a volume, FlexVolume mounts it');
      await csi.call('Controller', 'CreateVolume', { name: 'csi-made', capacity_range: { required_bytes: String(128 * 2 ** 20) }, volume_capabilities: [cap], parameters: { backend: 'block' } });
      const third = await flex.attachAndMount('csi-made', 'pv-csi-made', 'pod-uid-4', NODE);
      writeFileSync(join(third.podDir, 'from-flex.txt'), 'FlexVolume wrote this into a CSI-made volume\n');
      printStep({ model: 'host', call: 'write from-flex.txt', outcome: 'ok' });
      await flex.unmountAndDetach('pv-csi-made', NODE, third);
      await csi.call('Controller', 'DeleteVolume', { volume_id: 'csi-made' });
    } finally {
      await csi.stop();
    }

    heading('6. Nothing left behind on the node');
    check(mountsUnder(scratch.root).length === 0, `mounts left: ${mountsUnder(scratch.root).join(', ')}`);
    check(loopsUnder(scratch.root).length === 0, `loop devices left: ${loopsUnder(scratch.root).join(', ')}`);
    printStep({ model: 'host', call: 'mounts and loop devices under scratch', outcome: 'none' });
    process.stdout.write('\ndemo passed\n');
    return 0;
  } catch (err) {
    process.stderr.write(`\ndemo FAILED: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    scratch.cleanup();
    process.stdout.write(`cleaned up ${scratch.root}\n`);
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
}

main().then((code) => process.exit(code));
