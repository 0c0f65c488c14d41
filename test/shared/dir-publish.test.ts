import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
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
import type { Scratch } from '../helpers/scratch.js';
import { expectRejects } from './expect-error.js';
import { useScratchCore } from './core-scratch.js';

// A dir volume published with no staging to bind from (a non-attachable FlexVolume mount, a CSI
// publish with no stage step) binds its directory straight onto the pod's target
// (shared/backends/dir.ts); with a staging, the core binds from the staging as for any backend.
let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

const v = vid('direct');
const target = (uid: string) => podVolumeDir(s.kubeletDir, uid, 'pv-direct');
const made = () => createVolume(core, { id: v, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
const stagingDirs = () => (existsSync(join(s.stateDir, 'staging')) ? readdirSync(join(s.stateDir, 'staging')) : []);

describe('a dir volume published without a staging', () => {
  it('binds its directory onto the target, with the bind flags asked for, and makes no staging', async () => {
    await made();
    writeFileSync(join(core.catalog.dataDir(v), 'hello.txt'), 'from the volume');
    await publish(core, v, target('uid-1'), { readonly: true, via: 'flex', mountFlags: ['noexec', 'discard'] });
    const mounted = mountAt(target('uid-1'));
    expect(mounted?.mountOptions).toEqual(expect.arrayContaining(['ro', 'noexec']));
    expect(existsSync(join(target('uid-1'), 'hello.txt'))).toBe(true);
    expect(stagingDirs()).toEqual([]);
    expect(await core.nodeState.listForVolume(v)).toEqual([expect.objectContaining({ kind: 'publish', path: target('uid-1') })]);
    expect((await core.nodeState.listForVolume(v))[0]?.stagingPath).toBeUndefined();
    // The implicit attachment stands for the mount, and goes with it.
    expect((await core.catalog.requireVolume(v)).attachments).toEqual([expect.objectContaining({ node: 'node-a', implicit: true })]);
    await unpublish(core, target('uid-1'));
    expect(mountAt(target('uid-1'))).toBeUndefined();
    expect((await core.catalog.requireVolume(v)).attachments).toEqual([]);
  });

  it('refuses rw on a read-only publish before it makes anything', async () => {
    await made();
    await expectRejects(publish(core, v, target('uid-2'), { readonly: true, via: 'flex', mountFlags: ['rw'] }), 'InvalidArgument', /rw cannot be applied/);
    expect(existsSync(target('uid-2'))).toBe(false);
    expect(await core.nodeState.listForVolume(v)).toEqual([]);
    expect((await core.catalog.requireVolume(v)).attachments).toEqual([]);
  });

  it('binds from the staging when the volume has one (CSI NodeStageVolume)', async () => {
    await made();
    await attach(core, v, nid('node-a'), { readonly: false, via: 'csi' });
    const global = deviceMountPath(s.kubeletDir, 'pv-direct');
    mkdirSync(global, { recursive: true });
    await stage(core, v, global, { readonly: false });
    await publish(core, v, target('uid-3'), { readonly: false, stagingPath: global, via: 'csi' });
    const records = await core.nodeState.listForVolume(v);
    expect(records.find((r) => r.kind === 'publish')?.stagingPath).toBe(global);
    expect(mountAt(target('uid-3'))).toBeDefined();
    await unpublish(core, target('uid-3'));
    await unstage(core, global);
    expect(mountAt(global)).toBeUndefined();
  });
});
