import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FLEX_BIN, flexOptions, flexSession, runCli } from '../helpers/flex-runner.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, loopsUnder, type Scratch } from '../helpers/scratch.js';
import { killStalled, type StallingTool, stallingTool, untilStalled } from '../helpers/stalling-tool.js';

let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const { ok, createVolume } = flexSession(() => s.env);

/**
 * Runs a call until it starts the stalled tool, then kills it there. The call runs without the mount
 * addon (TWINVOL_NATIVE_MOUNT=off), which would make the step a system call that cannot be stalled;
 * the state it leaves is the same either way, and the retry runs with the addon.
 */
async function killedDuring(argv: string[], stall: StallingTool): Promise<void> {
  const env = { ...s.env, PATH: `${stall.dir}:/usr/bin:/bin`, TWINVOL_NATIVE_MOUNT: 'off' };
  const child = spawn(FLEX_BIN, argv, { cwd: '/', stdio: 'ignore', env });
  const exited = new Promise((done) => child.on('exit', done));
  try {
    await untilStalled(stall, argv[0] ?? 'the call');
  } finally {
    // Killed on success and on failure alike, so a test that times out leaves no stalled process.
    child.kill('SIGKILL');
    killStalled(stall);
    await exited;
  }
}

describe('a FlexVolume call killed inside its teardown', () => {
  it('unmountdevice killed before losetup --detach: the retry releases the loop device, and delete works', async () => {
    await createVolume('vol-k', '--size', '32Mi');
    const opts = flexOptions('pv-k', { volumeId: 'vol-k' });
    await ok('attach', opts, 'node-a');
    const wait = await ok('waitforattach', '', opts);
    const global = deviceMountPath(s.kubeletDir, 'pv-k');
    await ok('mountdevice', global, String(wait.reply.device), opts);
    expect(loopsUnder(s.root)).toHaveLength(1);

    await killedDuring(['unmountdevice', global], stallingTool(s.root, 'losetup', '--detach'));

    // kubelet retries; then the controller-manager detaches.
    await ok('unmountdevice', global);
    await ok('detach', 'pv-k', 'node-a');
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    const deleted = await runCli(s.env, ['delete', 'vol-k']);
    expect(deleted, deleted.stderr).toMatchObject({ exitCode: 0 });
    expect(existsSync(join(s.dataRoot, 'volumes', 'vol-k'))).toBe(false);
  });
});
