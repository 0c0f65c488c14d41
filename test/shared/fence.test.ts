import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { attach, attachmentOf, detach, releaseAttachment } from '../../shared/core/attachments.js';
import type { Core } from '../../shared/core/core.js';
import { stage, unstage } from '../../shared/core/staging.js';
import { createVolume, deleteVolume } from '../../shared/core/volumes.js';
import { flexOptions, runCli, runFlex } from '../helpers/flex-runner.js';
import { nid, vid } from '../helpers/ids.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { mountsUnder, type Scratch } from '../helpers/scratch.js';
import { coreIn, useScratchCore } from './core-scratch.js';
import { expectRejects } from './expect-error.js';

// A detach (ControllerUnpublishVolume, FlexVolume detach) while the node still has the volume staged
// keeps a fence: no other node attaches it before that node's side is gone (shared/core/attachments.ts).
let s: Scratch;
let nodeA: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  nodeA = c;
});

const v = vid('fenced');
const a = nid('node-a');
const b = nid('node-b');

async function stagedOnA(): Promise<string> {
  await createVolume(nodeA, { id: v, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
  await attach(nodeA, v, a, { readonly: false, via: 'csi' });
  const path = deviceMountPath(s.kubeletDir, 'pv-fenced');
  mkdirSync(path, { recursive: true });
  await stage(nodeA, v, path, { readonly: false });
  return path;
}

describe('a detach while the node still has the volume staged', () => {
  it('succeeds, keeps other nodes out, and is lifted by that node\'s last unstage', async () => {
    const path = await stagedOnA();
    const nodeB = coreIn(s, 'node-b');
    expect(await detach(nodeA, v, a)).toBe(true);
    expect(await detach(nodeA, v, a)).toBe(true);
    const fenced = await nodeA.catalog.requireVolume(v);
    expect(fenced.attachments).toEqual([expect.objectContaining({ node: 'node-a', inUse: true, fenced: true })]);
    expect(attachmentOf(fenced, a)).toBeUndefined();
    await expectRejects(attach(nodeB, v, b, { readonly: false, via: 'csi' }), 'FailedPrecondition', 'was detached from node node-a but is still staged there');
    await expectRejects(deleteVolume(nodeA, v), 'FailedPrecondition', 'still attached to node node-a');

    await unstage(nodeA, path);
    expect((await nodeA.catalog.requireVolume(v)).attachments).toEqual([]);
    await attach(nodeB, v, b, { readonly: false, via: 'csi' });
  });

  it('is attached again where it is still staged: the fence becomes the attachment', async () => {
    const path = await stagedOnA();
    await detach(nodeA, v, a);
    await attach(nodeA, v, a, { readonly: false, via: 'csi' });
    expect((await nodeA.catalog.requireVolume(v)).attachments).toEqual([expect.objectContaining({ node: 'node-a', inUse: true })]);
    expect(attachmentOf(await nodeA.catalog.requireVolume(v), a)?.fenced).toBeUndefined();
    await unstage(nodeA, path);
    // Unstaged but still attached: a plain detach removes it.
    expect(await detach(nodeA, v, a)).toBe(false);
    expect((await nodeA.catalog.requireVolume(v)).attachments).toEqual([]);
  });

  it('an administrator releases the fence of a node that is gone', async () => {
    await stagedOnA();
    await detach(nodeA, v, a);
    // Asked from another machine: on this one node-a still has the volume staged, which release refuses.
    const r = await runCli({ ...s.env, TWINVOL_NODE_NAME: 'admin-host' }, ['release', 'fenced', '--node', 'node-a', '--force']);
    expect(r, r.stderr).toMatchObject({ exitCode: 0, stdout: 'released: fenced from node node-a\n' });
    expect((await nodeA.catalog.requireVolume(v)).attachments).toEqual([]);
    await attach(coreIn(s, 'node-b'), v, b, { readonly: false, via: 'csi' });
    // The node that was gone comes back: its unstage finds nothing of the fence to lift.
    await unstage(nodeA, deviceMountPath(s.kubeletDir, 'pv-fenced'));
    expect((await nodeA.catalog.requireVolume(v)).attachments.map((x) => x.node)).toEqual(['node-b']);
  });

  it('a reboot took the node\'s records: the unstage kubelet still sends clears the mark, so a detach frees the volume', async () => {
    const path = await stagedOnA();
    // The reboot: mounts gone, the tmpfs state dir empty; the catalog (cluster state) keeps the mark.
    releaseUnderMounts(path);
    rmSync(s.stateDir, { recursive: true, force: true });
    expect((await nodeA.catalog.requireVolume(v)).attachments[0]?.inUse).toBe(true);
    await unstage(nodeA, path, { volumeId: v });
    expect(await detach(nodeA, v, a)).toBe(false);
    await attach(coreIn(s, 'node-b'), v, b, { readonly: false, via: 'csi' });
  });

  it("release is refused for this node while a staging there is its record alone (a dir volume's), and allowed once unstaged", async () => {
    const path = await stagedOnA();
    expect(mountsUnder(path)).toEqual([]);
    await expectRejects(releaseAttachment(nodeA, v, a), 'FailedPrecondition', `node node-a is this node, and it still has volume fenced staged at ${path}`);
    await unstage(nodeA, path);
    expect(await releaseAttachment(nodeA, v, a)).toBe(true);
    expect((await nodeA.catalog.requireVolume(v)).attachments).toEqual([]);
  });

  it('the same through the FlexVolume executable, which names only the device path', async () => {
    await createVolume(nodeA, { id: v, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
    const opts = flexOptions('pv-fenced', { volumeId: 'fenced' });
    const global = deviceMountPath(s.kubeletDir, 'pv-fenced');
    for (const argv of [['attach', opts, 'node-a'], ['mountdevice', global, '', opts]]) expect((await runFlex(s.env, argv)).reply.status).toBe('Success');
    releaseUnderMounts(global);
    rmSync(s.stateDir, { recursive: true, force: true });
    for (const argv of [['unmountdevice', global], ['detach', 'pv-fenced', 'node-a']]) expect((await runFlex(s.env, argv)).reply.status).toBe('Success');
    expect((await nodeA.catalog.requireVolume(v)).attachments).toEqual([]);
  });
});

/** What a reboot does to a mount: it is simply gone. */
function releaseUnderMounts(path: string): void {
  for (const m of mountsUnder(path)) execFileSync('umount', ['-l', m]);
}
