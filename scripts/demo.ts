// The main job: one volume's whole life through both plugin models, on loop devices in a scratch
// directory that is removed afterwards (mounts and loop devices included, even on failure).
//   npm run demo
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createScratch, loopsUnder, mountsUnder } from '../test/helpers/scratch.js';
import { FlexDriver } from './demo/flex-steps.js';
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

    heading('3. Nothing left behind on the node');
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
