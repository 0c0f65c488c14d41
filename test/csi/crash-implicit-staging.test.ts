// A CSI server killed while an inline block volume's implicit staging (twinvol's own, under the state
// dir) is made or taken down: kubelet's retried NodeUnpublishVolume finds no record of its target, and
// once answered done while the staging stayed mounted, its loop device bound, its attachment held and
// the inline volume never deleted, with nothing in `twinvol status` to say so.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { shQuote } from '../../flex/shell-quote.js';
import { killStalled, type StallingTool, untilStalled } from '../helpers/stalling-tool.js';
import { wrappedTool } from '../helpers/tool-wrapper.js';
import { outcome } from './helpers/client.js';
import { mountCap, targetPath } from './helpers/requests.js';
import { createCsiScratch, type CsiScratch, loopsBelow, mountsBelow } from './helpers/scratch.js';
import { launchCsi, type RunningCsi } from './helpers/server.js';

let s: CsiScratch;
const servers: RunningCsi[] = [];
const stalls: StallingTool[] = [];
beforeEach(() => {
  s = createCsiScratch('node-a');
});
afterEach(async () => {
  for (const stall of stalls.splice(0)) killStalled(stall);
  for (const server of servers.splice(0)) await server.stop();
  s.cleanup();
});

/** `tool` stopping (until killed) on a call with an argument that matches the shell pattern `pattern`. */
function stallOn(tool: string, pattern: string): StallingTool {
  const marker = join(s.root, `${tool}-stalled`);
  const { dir } = wrappedTool(s.root, tool, `for a in "$@"; do case "$a" in ${pattern}) echo $$ > ${shQuote(marker)}; exec sleep 60;; esac; done`);
  const stall = { dir, marker };
  stalls.push(stall);
  return stall;
}

const inline = { 'csi.storage.k8s.io/ephemeral': 'true', 'csi.storage.k8s.io/pod.name': 'web-0', backend: 'block', size: '16Mi' };

/** Runs `call` on a server whose mounts go through mount(8) and umount(8), and kills it (kill -9) at the stall. */
async function killedAt(stall: StallingTool, call: (server: RunningCsi) => Promise<unknown>): Promise<void> {
  // Through the tools, so that the stall can stop the server at the one step it names.
  const server = await launchCsi(s, { env: { PATH: `${stall.dir}:/usr/bin:/bin`, TWINVOL_NATIVE_MOUNT: 'off' } });
  servers.push(server);
  const reply = outcome(call(server));
  try {
    await untilStalled(stall, 'the call');
  } finally {
    server.child.kill('SIGKILL');
    killStalled(stall);
  }
  expect((await reply).code).not.toBe('OK');
  await server.stop();
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
    const stall = stallOn('umount', '*/staging/*');
    await killedAt(stall, async (server) => {
      await server.client.call('Node', 'NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: inline });
      await server.client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    });
    const server = await launchCsi(s);
    servers.push(server);
    await server.client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    expect(leftOf(id)).toEqual({ mounts: [], loops: [], records: [], volume: 'deleted' });
  });

  it('killed in NodePublishVolume as it mounted the implicit staging: the unpublish of a pod that went away takes what it made', async () => {
    const id = 'csi-killed-publish';
    const target = targetPath(s.kubeletDir, 'pod-2', 'scratch');
    mkdirSync(dirname(target), { recursive: true });
    // The staging's filesystem mount: mount -o loop of the volume's image.
    const stall = stallOn('mount', `*/volumes/${id}/image.img`);
    await killedAt(stall, (server) => server.client.call('Node', 'NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: inline }));
    const server = await launchCsi(s);
    servers.push(server);
    await server.client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    expect(leftOf(id)).toEqual({ mounts: [], loops: [], records: [], volume: 'deleted' });
  });
});
