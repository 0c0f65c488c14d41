import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { attach } from '../../shared/core/attachments.js';
import type { Core } from '../../shared/core/core.js';
import { publish, unpublish } from '../../shared/core/publishing.js';
import { createVolume } from '../../shared/core/volumes.js';
import { nid, vid } from '../helpers/ids.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { attachedNodes, rebootNode } from '../helpers/reboot.js';
import type { Scratch } from '../helpers/scratch.js';
import { useScratchCore } from './core-scratch.js';

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
