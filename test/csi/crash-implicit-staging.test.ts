// A CSI server killed while an inline block volume's implicit staging (twinvol's own, under the state
// dir) is made or taken down: kubelet's retried NodeUnpublishVolume finds no record of its target, and
// once answered done while the staging stayed mounted, its loop device bound, its attachment held and
// the inline volume never deleted, with nothing in `twinvol status` to say so.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useKillableServers } from '../helpers/killable-servers.js';
import type { StallingTool } from '../helpers/stalling-tool.js';
import { mountCap, targetPath } from './helpers/requests.js';
import { type CsiScratch, loopsBelow, mountsBelow } from './helpers/scratch.js';
import type { RunningCsi } from './helpers/server.js';

let s: CsiScratch;
const crash = useKillableServers((scratch) => {
  s = scratch;
});

const inline = { 'csi.storage.k8s.io/ephemeral': 'true', 'csi.storage.k8s.io/pod.name': 'web-0', backend: 'block', size: '16Mi' };

/** Runs `call` on a server whose mounts go through mount(8) and umount(8), and kills it (kill -9) at the stall. */
async function killedAt(stall: StallingTool, call: (server: RunningCsi) => Promise<unknown>): Promise<void> {
  // Through the tools, so that the stall can stop the server at the one step it names.
  await crash.killedAt(stall, call, { TWINVOL_NATIVE_MOUNT: 'off' });
  rmSync(stall.dir, { recursive: true, force: true });
}

/** What the node and the catalog still hold of the volume once the retried unpublish answered. */
function leftOf(id: string) {
  const record = join(s.dataRoot, 'volumes', id, 'volume.json');
  return {
    mounts: mountsBelow(s.root),
    loops: loopsBelow(s.root),
    records: existsSync(join(s.stateDir, 'mounts')) ? readdirSync(join(s.stateDir, 'mounts')) : [],
    volume: existsSync(record) ? (JSON.parse(readFileSync(record, 'utf8')) as { attachments: unknown[] }).attachments : 'deleted',
  };
}

describe('a CSI server killed while an inline block volume is staged or unstaged by twinvol itself', () => {
  it('killed in NodeUnpublishVolume before the implicit staging went: the retry takes it down and deletes the volume', async () => {
    const id = 'csi-killed-unpublish';
    const target = targetPath(s.kubeletDir, 'pod-1', 'scratch');
    mkdirSync(dirname(target), { recursive: true });
    const stall = crash.stallOn('umount', '*/staging/*');
    await killedAt(stall, async (server) => {
      await server.client.call('Node', 'NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: inline });
      await server.client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    });
    const server = await crash.launch();
    await server.client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    expect(leftOf(id)).toEqual({ mounts: [], loops: [], records: [], volume: 'deleted' });
  });

  it('killed in NodePublishVolume as it mounted the implicit staging: the unpublish of a pod that went away takes what it made', async () => {
    const id = 'csi-killed-publish';
    const target = targetPath(s.kubeletDir, 'pod-2', 'scratch');
    mkdirSync(dirname(target), { recursive: true });
    // The staging's filesystem mount: mount -o loop of the volume's image.
    const stall = crash.stallOn('mount', `*/volumes/${id}/image.img`);
    await killedAt(stall, (server) => server.client.call('Node', 'NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: inline }));
    const server = await crash.launch();
    await server.client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    expect(leftOf(id)).toEqual({ mounts: [], loops: [], records: [], volume: 'deleted' });
  });
});
