import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { flexOptions, flexSession, runAdmin } from '../helpers/flex-runner.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// `twinvol volume release VOLUME --node NODE --force` (issue 11, item 6): frees an attachment held by a
// node that is gone; refused without --force, and refused for this node while it still has the
// volume here (releaseAttachment, shared/core/attachments.ts), whatever --force says.
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const { ok, createVolume } = flexSession(() => s.env);
const opts = (id: string) => flexOptions(`pv-${id}`, { volumeId: id });
const release = (...args: string[]) => runAdmin(s.env, ['volume', 'release', ...args]);
const holders = (id: string): string[] =>
  (JSON.parse(readFileSync(join(s.dataRoot, 'volumes', id, 'volume.json'), 'utf8')) as { attachments: { node: string }[] }).attachments.map((a) => a.node);

describe('twinvol volume release', () => {
  it('frees a gone node\'s attachment only with --force; the node by --node or by position', async () => {
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    await ok('attach', opts('dir'), 'node-b');
    const refused = await release('dir', '--node', 'node-b');
    expect(refused).toMatchObject({ exitCode: 1, stdout: '' });
    expect(refused.stderr).toMatch(/^twinvol: releasing dir from node node-b .* run again with --force\n$/);
    expect(holders('dir')).toEqual(['node-b']);

    expect(await release('dir', '--node', 'node-b', '--force')).toEqual({ exitCode: 0, stdout: 'released: dir from node node-b\n', stderr: '' });
    expect(holders('dir')).toEqual([]);
    await ok('attach', opts('dir'), 'node-b');
    expect(await release('dir', 'node-b', '--force')).toMatchObject({ exitCode: 0, stdout: 'released: dir from node node-b\n' });
    expect(await release('dir', 'node-b', '--force')).toMatchObject({ exitCode: 0, stdout: 'dir was not attached to node node-b\n' });
    expect(await release('dir', '--force')).toMatchObject({ exitCode: 2, stdout: '' });
  });

  it('is refused for this node while it still has the volume mounted here, even with --force; its teardown frees it', async () => {
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    const global = deviceMountPath(s.kubeletDir, 'pv-dir');
    await ok('attach', opts('dir'), 'node-a');
    await ok('mountdevice', global, '', opts('dir'));
    const r = await release('dir', '--node', 'node-a', '--force');
    expect(r).toMatchObject({ exitCode: 1, stdout: '' });
    expect(r.stderr).toContain(`still has volume dir staged at ${global}`);
    expect(holders('dir')).toEqual(['node-a']);

    // Torn down here but never detached (the controller-manager that would have is gone): now it goes.
    await ok('unmountdevice', global);
    expect(await release('dir', '--node', 'node-a', '--force')).toMatchObject({ exitCode: 0, stdout: 'released: dir from node node-a\n' });
    expect(holders('dir')).toEqual([]);
  });

  it('is refused for this node while the volume\'s loop device is bound here', async () => {
    await createVolume('blk', '--size', '8Mi');
    await ok('attach', opts('blk'), 'node-a');
    const device = String((await ok('waitforattach', '', opts('blk'))).reply.device);
    const r = await release('blk', '--node', 'node-a', '--force');
    expect(r).toMatchObject({ exitCode: 1, stdout: '' });
    expect(r.stderr).toContain(`still has volume blk bound to ${device}`);
    expect(holders('blk')).toEqual(['node-a']);
  });
});
