import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { attach } from '../../shared/core/attachments.js';
import type { Core } from '../../shared/core/core.js';
import { publish, unpublish } from '../../shared/core/publishing.js';
import { stage, unstage } from '../../shared/core/staging.js';
import { createVolume } from '../../shared/core/volumes.js';
import { mountAt } from '../../shared/mountinfo.js';
import { nid, vid } from '../helpers/ids.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { attachedNodes, rebootNode } from '../helpers/reboot.js';
import type { Scratch } from '../helpers/scratch.js';
import { useScratchCore } from './core-scratch.js';
import { expectRejects } from './expect-error.js';

// An attachment an implicit staging made (a FlexVolume mount without attach, a CSI inline volume) has
// no detach coming for it. A reboot takes the records of that staging with its mounts, so the
// unpublish kubelet sends afterwards finds no record: it must still release the attachment (found by
// test/reliability/reboot-flex.test.ts and reboot-csi.test.ts), and only such an attachment.
let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

const v = vid('self-staged');
const pod = (uid: string) => podVolumeDir(s.kubeletDir, uid, 'pv-self');

async function publishedWithoutAttach(...uids: string[]): Promise<void> {
  await createVolume(core, { id: v, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
  for (const uid of uids) await publish(core, v, pod(uid), { readonly: false, via: 'flex' });
}

describe('the attachment an implicit staging made', () => {
  it('is marked implicit, and goes with the last unpublish as before', async () => {
    await publishedWithoutAttach('uid-1');
    expect((await core.catalog.requireVolume(v)).attachments).toEqual([expect.objectContaining({ node: 'node-a', implicit: true })]);
    await unpublish(core, pod('uid-1'));
    expect(await attachedNodes(s, v)).toEqual([]);
  });

  it('goes with the first unpublish after a reboot, whether the caller names the volume or guesses it', async () => {
    await publishedWithoutAttach('uid-1', 'uid-2');
    await rebootNode(s);
    await unpublish(core, pod('uid-1'), { guessedVolumeId: v });
    expect(await attachedNodes(s, v)).toEqual([]);
    await unpublish(core, pod('uid-2'), { volumeId: v });
    expect(await attachedNodes(s, v)).toEqual([]);
  });

  it('stays while the node still holds the volume: a guess that names it does not take it from a live staging', async () => {
    await publishedWithoutAttach('uid-1');
    await unpublish(core, pod('uid-never-mounted'), { guessedVolumeId: v });
    expect(await attachedNodes(s, v)).toEqual(['node-a']);
    await unpublish(core, pod('uid-1'));
    expect(await attachedNodes(s, v)).toEqual([]);
  });

  it('becomes an attach step\'s when one attaches the volume here too: then only its detach releases it', async () => {
    await publishedWithoutAttach('uid-1');
    await attach(core, v, nid('node-a'), { readonly: false, via: 'csi' });
    expect((await core.catalog.requireVolume(v)).attachments[0]?.implicit).toBeUndefined();
    await rebootNode(s);
    await unpublish(core, pod('uid-1'), { volumeId: v });
    expect(await attachedNodes(s, v)).toEqual(['node-a']);
  });

  it('is not what an attach step made: an unpublish finding no record leaves that one alone', async () => {
    await createVolume(core, { id: v, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
    await attach(core, v, nid('node-a'), { readonly: false, via: 'csi' });
    rmSync(s.stateDir, { recursive: true, force: true });
    await unpublish(core, pod('uid-1'), { volumeId: v });
    expect(await attachedNodes(s, v)).toEqual(['node-a']);
  });
});

// A dir volume published with no staging to bind from (a non-attachable FlexVolume mount, a CSI
// publish with no stage step) binds its directory straight onto the pod's target, and the implicit
// attachment stands for that mount (shared/backends/dir.ts); with a staging, the core binds from the
// staging as for any backend.
const direct = vid('direct');
const target = (uid: string) => podVolumeDir(s.kubeletDir, uid, 'pv-direct');
const made = () => createVolume(core, { id: direct, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
const stagingDirs = () => (existsSync(join(s.stateDir, 'staging')) ? readdirSync(join(s.stateDir, 'staging')) : []);

describe('a dir volume published without a staging', () => {
  it('binds its directory onto the target, with the bind flags asked for, and makes no staging', async () => {
    await made();
    writeFileSync(join(core.catalog.dataDir(direct), 'hello.txt'), 'from the volume');
    await publish(core, direct, target('uid-1'), { readonly: true, via: 'flex', mountFlags: ['noexec', 'discard'] });
    const mounted = mountAt(target('uid-1'));
    expect(mounted?.mountOptions).toEqual(expect.arrayContaining(['ro', 'noexec']));
    expect(existsSync(join(target('uid-1'), 'hello.txt'))).toBe(true);
    expect(stagingDirs()).toEqual([]);
    expect(await core.nodeState.listForVolume(direct)).toEqual([expect.objectContaining({ kind: 'publish', path: target('uid-1') })]);
    expect((await core.nodeState.listForVolume(direct))[0]?.stagingPath).toBeUndefined();
    // The implicit attachment stands for the mount, and goes with it.
    expect((await core.catalog.requireVolume(direct)).attachments).toEqual([expect.objectContaining({ node: 'node-a', implicit: true })]);
    await unpublish(core, target('uid-1'));
    expect(mountAt(target('uid-1'))).toBeUndefined();
    expect((await core.catalog.requireVolume(direct)).attachments).toEqual([]);
  });

  it('refuses rw on a read-only publish before it makes anything', async () => {
    await made();
    await expectRejects(publish(core, direct, target('uid-2'), { readonly: true, via: 'flex', mountFlags: ['rw'] }), 'InvalidArgument', /rw cannot be applied/);
    expect(existsSync(target('uid-2'))).toBe(false);
    expect(await core.nodeState.listForVolume(direct)).toEqual([]);
    expect((await core.catalog.requireVolume(direct)).attachments).toEqual([]);
  });

  it('binds from the staging when the volume has one (CSI NodeStageVolume)', async () => {
    await made();
    await attach(core, direct, nid('node-a'), { readonly: false, via: 'csi' });
    const global = deviceMountPath(s.kubeletDir, 'pv-direct');
    mkdirSync(global, { recursive: true });
    await stage(core, direct, global, { readonly: false });
    await publish(core, direct, target('uid-3'), { readonly: false, stagingPath: global, via: 'csi' });
    const records = await core.nodeState.listForVolume(direct);
    expect(records.find((r) => r.kind === 'publish')?.stagingPath).toBe(global);
    expect(mountAt(target('uid-3'))).toBeDefined();
    await unpublish(core, target('uid-3'));
    await unstage(core, global);
    expect(mountAt(global)).toBeUndefined();
  });
});
