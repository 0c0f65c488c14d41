// A process killed between a bind and the remount that gives the bind its flags (shared/mounter.ts
// mount: a bind, then `mount -o remount,bind,ro,...` of it). The bind was left read-write on the
// target, and the retry, finding the path mounted and its record there, answered OK: a read-only
// publish, or a read-only staging that every publish binds from, stayed writable for as long as the
// pod ran. Both steps are now made on a private scratch mount point and the finished bind moved onto
// the target (shared/bind-by-move.ts): the kill leaves the target empty, its scratch bind is undone
// by the next server's start, and the retry binds read-only.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readMounts } from '../../shared/mountinfo.js';
import { outcome } from '../csi/helpers/client.js';
import { MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';
import type { CsiScratch } from '../csi/helpers/scratch.js';
import type { RunningCsi } from '../csi/helpers/server.js';
import { flexSession } from '../helpers/flex-runner.js';
import { useKillableServers } from '../helpers/killable-servers.js';

let s: CsiScratch;
const crash = useKillableServers((scratch) => {
  s = scratch;
});

/** mount(8) stopping (until killed) at the remount of a bind; every other call is the real one. */
const stallAtRemount = () => crash.stallOn('mount', 'remount,*');

/** Through the tools, so that the stall stops the call between the bind and its remount. */
const THROUGH_TOOLS = { TWINVOL_NATIVE_MOUNT: 'off' };

/** The options of the mount on top at `path`, as the kernel's table has them. */
const optionsAt = (path: string) => readMounts().filter((m) => m.mountPoint === path).at(-1)?.mountOptions ?? [];

const launch = (env?: NodeJS.ProcessEnv): Promise<RunningCsi> => crash.launch(env);

/** The scratch mount points under the state dir (shared/bind-by-move.ts), each with what is mounted there. */
function scratchBinds(): string[][] {
  const dir = join(s.stateDir, 'binds');
  return (existsSync(dir) ? readdirSync(dir) : []).map((name) => optionsAt(join(dir, name)));
}

describe('a CSI server killed between a read-only publish\'s bind and its remount', () => {
  for (const backend of ['dir', 'block'] as const) {
    it(`${backend}: the retried NodePublishVolume binds again, read-only, rather than answer OK over a writable bind`, async () => {
      const id = `ro-${backend}`;
      const cap = mountCap(backend === 'block' ? 'ext4' : '');
      const staging = stagingPath(s.kubeletDir, id);
      const target = targetPath(s.kubeletDir, 'pod-1', id);
      mkdirSync(staging, { recursive: true });
      mkdirSync(dirname(target), { recursive: true });
      const first = await launch();
      await first.client.call('Controller', 'CreateVolume', { name: id, volume_capabilities: [cap], capacity_range: size(16 * MiB), parameters: { backend } });
      await first.client.call('Controller', 'ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
      await first.client.call('Node', 'NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap });
      await first.stop();

      const publish = { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: cap, readonly: true };
      await crash.killedAt(stallAtRemount(), (killed) => killed.client.call('Node', 'NodePublishVolume', publish), THROUGH_TOOLS);
      // What the kill left: nothing on the target; the bind, writable, on its scratch mount point.
      expect(optionsAt(target)).toEqual([]);
      expect(scratchBinds()).toEqual([expect.arrayContaining(['rw'])]);

      const next = await launch();
      expect(scratchBinds()).toEqual([]);
      await next.client.call('Node', 'NodePublishVolume', publish);
      expect(optionsAt(target)).toContain('ro');
      expect(readMounts().filter((m) => m.mountPoint === target)).toHaveLength(1);
      await next.client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
      await next.client.call('Node', 'NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
      await next.client.call('Controller', 'ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
      expect((await outcome(next.client.call('Controller', 'DeleteVolume', { volume_id: id }))).code).toBe('OK');
    });
  }
});

describe('a CSI server killed between a read-only staging\'s bind and its remount', () => {
  it('static bind volume: the retried NodeStageVolume binds it again, read-only, and so does each publish from it', async () => {
    const source = join(s.root, 'host-dir');
    mkdirSync(source);
    const { createVolume } = flexSession(() => s.env);
    // The administrator names a host directory, bound into place (mountOptions bind).
    await createVolume('ro-static', '--backend', 'static', '--source', source, '--fs-type', 'none', '--mount-options', 'bind', '--access', 'multi-node');
    const cap = mountCap('', 'MULTI_NODE_READER_ONLY');
    const staging = stagingPath(s.kubeletDir, 'ro-static');
    const target = targetPath(s.kubeletDir, 'pod-1', 'ro-static');
    mkdirSync(staging, { recursive: true });
    mkdirSync(dirname(target), { recursive: true });
    const first = await launch();
    await first.client.call('Controller', 'ControllerPublishVolume', { volume_id: 'ro-static', node_id: 'node-a', volume_capability: cap, readonly: true });
    await first.stop();

    const stage = { volume_id: 'ro-static', staging_target_path: staging, volume_capability: cap };
    await crash.killedAt(stallAtRemount(), (killed) => killed.client.call('Node', 'NodeStageVolume', stage), THROUGH_TOOLS);
    expect(optionsAt(staging)).toEqual([]);
    expect(scratchBinds()).toEqual([expect.arrayContaining(['rw'])]);

    const next = await launch();
    expect(scratchBinds()).toEqual([]);
    await next.client.call('Node', 'NodeStageVolume', stage);
    expect(optionsAt(staging)).toContain('ro');
    expect(readMounts().filter((m) => m.mountPoint === staging)).toHaveLength(1);
    await next.client.call('Node', 'NodePublishVolume', { ...stage, target_path: target });
    expect(optionsAt(target)).toContain('ro');
    await next.client.call('Node', 'NodeUnpublishVolume', { volume_id: 'ro-static', target_path: target });
    await next.client.call('Node', 'NodeUnstageVolume', stage);
    await next.client.call('Controller', 'ControllerUnpublishVolume', { volume_id: 'ro-static', node_id: 'node-a' });
  });
});

describe('the writable bind an older twinvol\'s killed publish left on its target', () => {
  it('is taken off and made again read-only by the retried NodePublishVolume', async () => {
    const id = 'ro-older';
    const cap = mountCap('');
    const staging = stagingPath(s.kubeletDir, id);
    const target = targetPath(s.kubeletDir, 'pod-1', id);
    mkdirSync(staging, { recursive: true });
    mkdirSync(dirname(target), { recursive: true });
    const server = await launch();
    await server.client.call('Controller', 'CreateVolume', { name: id, volume_capabilities: [cap], capacity_range: size(16 * MiB), parameters: { backend: 'dir' } });
    await server.client.call('Controller', 'ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
    await server.client.call('Node', 'NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap });
    const publish = { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: cap, readonly: true };
    await server.client.call('Node', 'NodePublishVolume', publish);
    // What an older twinvol's call killed between its bind and its remount left on the target.
    execFileSync('mount', ['-o', 'remount,bind,rw', target]);
    expect(optionsAt(target)).toContain('rw');
    await server.client.call('Node', 'NodePublishVolume', publish);
    expect(optionsAt(target)).toContain('ro');
    expect(readMounts().filter((m) => m.mountPoint === target)).toHaveLength(1);
    await server.client.call('Node', 'NodeUnpublishVolume', { volume_id: id, target_path: target });
    await server.client.call('Node', 'NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await server.client.call('Controller', 'ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
  });
});
