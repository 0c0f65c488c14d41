import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FLEX_BIN, flexOptions, flexSession, runCli } from '../helpers/flex-runner.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, loopsUnder, type Scratch } from '../helpers/scratch.js';

let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const { ok, createVolume } = flexSession(() => s.env);

/**
 * A `losetup` that stops inside `--detach` until it is killed, and says so with a marker file: the
 * FlexVolume process can then be killed at exactly that point, as kubelet's node dies or the process
 * is OOM-killed. Other calls pass through to the real tool.
 */
function stallingLosetup(): { dir: string; marker: string } {
  const dir = join(s.root, 'stall-bin');
  const marker = join(s.root, 'losetup-stalled');
  mkdirSync(dir);
  const real = ['/usr/sbin/losetup', '/sbin/losetup', '/usr/bin/losetup'].find((p) => existsSync(p));
  writeFileSync(
    join(dir, 'losetup'),
    `#!/bin/sh\nif [ "$1" = "--detach" ]; then echo $$ > '${marker}'; exec sleep 60; fi\nexec ${real} "$@"\n`,
  );
  chmodSync(join(dir, 'losetup'), 0o755);
  return { dir, marker };
}

async function killedDuring(argv: string[], path: string, marker: string): Promise<void> {
  const child = spawn(FLEX_BIN, argv, { cwd: '/', stdio: 'ignore', env: { ...s.env, PATH: `${path}:/usr/bin:/bin` } });
  const exited = new Promise((done) => child.on('exit', done));
  try {
    const until = Date.now() + 20_000;
    while (!existsSync(marker) || !readFileSync(marker, 'utf8').trim()) {
      if (Date.now() > until) throw new Error(`${argv[0]} never reached losetup --detach`);
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    // Killed on success and on failure alike, so a test that times out leaves no stalled process.
    child.kill('SIGKILL');
    const sleeper = existsSync(marker) ? Number(readFileSync(marker, 'utf8')) : 0;
    if (sleeper > 0) {
      try {
        process.kill(sleeper, 'SIGKILL');
      } catch {
        // already gone
      }
    }
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

    const stall = stallingLosetup();
    await killedDuring(['unmountdevice', global], stall.dir, stall.marker);

    // kubelet retries; then the controller-manager detaches.
    await ok('unmountdevice', global);
    await ok('detach', 'pv-k', 'node-a');
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    const deleted = await runCli(s.env, ['delete', 'vol-k']);
    expect(deleted, deleted.stderr).toMatchObject({ exitCode: 0 });
    expect(existsSync(join(s.dataRoot, 'volumes', 'vol-k'))).toBe(false);
  });
});
