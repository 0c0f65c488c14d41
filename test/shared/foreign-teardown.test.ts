import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Core } from '../../shared/core/core.js';
import { attach } from '../../shared/core/attachments.js';
import { publish, unpublish } from '../../shared/core/publishing.js';
import { createVolume } from '../../shared/core/volumes.js';
import { stage, unstage } from '../../shared/core/staging.js';
import { mountAt } from '../../shared/mountinfo.js';
import { runFlex } from '../helpers/flex-runner.js';
import { nid, vid } from '../helpers/ids.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import type { Scratch } from '../helpers/scratch.js';
import { useScratchCore } from './core-scratch.js';
import { expectRejects } from './expect-error.js';

// Teardown removes only what the node's records say twinvol made (issue: unmount of a file under the
// kubelet dir deleted it, and of someone else's mount unmounted it). Asked of the core and of the
// FlexVolume executable; test/csi/node.test.ts asks the CSI server.
let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

/** A tmpfs mounted by "someone else" at `path`: the scratch's cleanup unmounts it. */
function foreignMount(path: string): void {
  mkdirSync(path, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'someone-else', path]);
  writeFileSync(join(path, 'theirs.txt'), 'keep me');
}

function fileWithData(path: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, 'a file someone keeps here');
}

describe('teardown of what twinvol did not make', () => {
  it('unpublish leaves a foreign mount and a file with data, says so, and still removes an empty mount point', async () => {
    const mounted = podVolumeDir(s.kubeletDir, 'uid-1', 'pv-1');
    foreignMount(mounted);
    expect(await unpublish(core, mounted)).toMatch(/^left .*pv-1 alone: it holds a mount twinvol did not make, someone-else \(tmpfs\)/);
    expect(readFileSync(join(mounted, 'theirs.txt'), 'utf8')).toBe('keep me');

    const file = podVolumeDir(s.kubeletDir, 'uid-2', 'pv-2');
    fileWithData(file);
    expect(await unpublish(core, file)).toMatch(/alone: a file of 25 bytes that twinvol did not make/);
    expect(readFileSync(file, 'utf8')).toBe('a file someone keeps here');

    const full = podVolumeDir(s.kubeletDir, 'uid-3', 'pv-3');
    fileWithData(join(full, 'inside.txt'));
    expect(await unpublish(core, full)).toMatch(/alone: a directory that still holds files/);
    expect(existsSync(join(full, 'inside.txt'))).toBe(true);

    // What a call cut short after its unmount leaves is the one thing that may go.
    const empty = podVolumeDir(s.kubeletDir, 'uid-4', 'pv-4');
    mkdirSync(empty, { recursive: true });
    expect(await unpublish(core, empty)).toBeUndefined();
    expect(existsSync(empty)).toBe(false);
  });

  it('unstage leaves a foreign mount at a staging path', async () => {
    const global = deviceMountPath(s.kubeletDir, 'pv-5');
    foreignMount(global);
    expect(await unstage(core, global)).toMatch(/holds a mount twinvol did not make/);
    expect(mountAt(global)?.source).toBe('someone-else');
  });

  it('FlexVolume unmount and unmountdevice answer Success with the message, touching nothing', async () => {
    const dir = podVolumeDir(s.kubeletDir, 'uid-6', 'pv-6');
    foreignMount(dir);
    const file = podVolumeDir(s.kubeletDir, 'uid-7', 'pv-7');
    fileWithData(file);
    const global = deviceMountPath(s.kubeletDir, 'pv-8');
    foreignMount(global);
    for (const [verb, path] of [['unmount', dir], ['unmount', file], ['unmountdevice', global]] as const) {
      const r = await runFlex(s.env, [verb, path]);
      expect(r.exitCode, r.output).toBe(0);
      expect(r.reply).toEqual({ status: 'Success', message: expect.stringMatching(/^left .* alone: /) });
    }
    expect(mountAt(dir)?.source).toBe('someone-else');
    expect(mountAt(global)?.source).toBe('someone-else');
    expect(readFileSync(file, 'utf8')).toBe('a file someone keeps here');
  });

  it('never tears down a path in the name of a volume other than the one it holds', async () => {
    await createVolume(core, { id: 'mine', backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
    await attach(core, vid('mine'), nid('node-a'), { readonly: false, via: 'csi' });
    const global = deviceMountPath(s.kubeletDir, 'pv-mine');
    mkdirSync(global, { recursive: true });
    await stage(core, vid('mine'), global, { readonly: false });
    const dir = podVolumeDir(s.kubeletDir, 'uid-m', 'pv-mine');
    await publish(core, vid('mine'), dir, { readonly: false, stagingPath: global, via: 'csi' });
    await expectRejects(unpublish(core, dir, { volumeId: vid('other') }), 'InvalidArgument', `${dir} holds volume mine, not other`);
    await expectRejects(unstage(core, global, { volumeId: vid('other') }), 'InvalidArgument', `${global} holds volume mine, not other`);
    expect(mountAt(dir)).toBeDefined();
    await unpublish(core, dir, { volumeId: vid('mine') });
    await unstage(core, global, { volumeId: vid('mine') });
    expect(mountAt(global)).toBeUndefined();
  });

  // Found by test/fuzz/csi-requests.test.ts: NodePublishVolume at <kubelet>/pods bind-mounted a volume
  // over every pod's directory, hiding their mounts (a later NodeGetVolumeStats of one was INTERNAL
  // ENOENT) and sending kubelet's next mkdirs into the volume.
  it('publish and stage never mount over a directory that holds someone\'s mount below it', async () => {
    const below = podVolumeDir(s.kubeletDir, 'uid-1', 'pv-1');
    foreignMount(below);
    await createVolume(core, { id: vid('v'), backend: 'dir', capacityBytes: 2 ** 24, createdBy: 'cli' });
    await attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'cli' });
    const staging = join(s.kubeletDir, 'plugins/twinvol/v/globalmount');
    await stage(core, vid('v'), staging, { readonly: false });
    const pods = join(s.kubeletDir, 'pods');
    await expectRejects(publish(core, vid('v'), pods, { readonly: false, stagingPath: staging, via: 'csi' }), 'FailedPrecondition', `${pods} holds a mount below it (${below})`);
    await expectRejects(stage(core, vid('v'), pods, { readonly: false }), 'FailedPrecondition', `${pods} holds a mount below it`);
    expect(mountAt(pods)).toBeUndefined();
    expect(readFileSync(join(below, 'theirs.txt'), 'utf8')).toBe('keep me');
  });
});
