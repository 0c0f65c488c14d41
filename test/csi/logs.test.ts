import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { MiB, mountCap, size, stagingPath } from './helpers/requests.js';
import type { LogEntry } from './helpers/server.js';

/**
 * The CSI server's log (csi/logging.ts through pino, csi/rpc.ts per call), read from the real
 * bundle's stderr: one JSON object per line (logWhen parses every line, so any other text fails the
 * test), the call's method, request id and volume id on its lines, routine calls only at debug.
 */
const ROUTINE = ['Probe', 'GetPluginInfo', 'GetPluginCapabilities', 'ControllerGetCapabilities', 'NodeGetCapabilities', 'GroupControllerGetCapabilities'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const rpcLines = (entries: LogEntry[], method: string) => entries.filter((e) => e.msg === 'rpc' && e.method === method);

/** Every routine call once, through the service that offers it. */
async function routineCalls(csi: ReturnType<typeof useCsiServer>): Promise<void> {
  await csi.identity('Probe');
  await csi.identity('GetPluginInfo');
  await csi.identity('GetPluginCapabilities');
  await csi.ctl('ControllerGetCapabilities');
  await csi.node('NodeGetCapabilities');
  await csi.client.call('GroupController', 'GroupControllerGetCapabilities');
}

describe('at the default level (info)', () => {
  const csi = useCsiServer();

  it('Probe and the capability calls leave no line; each other call one line with its method, request id and volume id', async () => {
    await routineCalls(csi);
    await csi.ctl('CreateVolume', { name: 'l-dir', volume_capabilities: [mountCap()], capacity_range: size(MiB), parameters: { backend: 'dir' } });
    await expectCode(csi.ctl('ControllerGetVolume', { volume_id: 'l-none' }), 'NOT_FOUND');
    await csi.node('NodeGetInfo');
    const { entries } = await csi.server.logWhen((es) => rpcLines(es, 'NodeGetInfo').length > 0);

    expect(entries.filter((e) => ROUTINE.includes(String(e.method)))).toEqual([]);
    expect(entries.every((e) => ['info', 'warn', 'error'].includes(String(e.level)) && typeof e.time === 'string' && e.component === 'twinvol-csi')).toBe(true);
    const create = rpcLines(entries, 'CreateVolume');
    expect(create).toEqual([expect.objectContaining({ level: 'info', volumeId: 'l-dir', code: 'OK', requestId: expect.stringMatching(UUID) })]);
    expect(rpcLines(entries, 'ControllerGetVolume')).toEqual([
      expect.objectContaining({ level: 'warn', volumeId: 'l-none', code: 'NOT_FOUND', message: 'volume l-none does not exist', requestId: expect.stringMatching(UUID) }),
    ]);
    // A call about no volume has no volume id, and still its own request id.
    const info = rpcLines(entries, 'NodeGetInfo');
    expect(info).toEqual([expect.objectContaining({ level: 'info', code: 'OK', requestId: expect.stringMatching(UUID) })]);
    expect('volumeId' in (info[0] ?? {})).toBe(false);
    const ids = entries.filter((e) => e.msg === 'rpc').map((e) => e.requestId);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('at debug', () => {
  const csi = useCsiServer({ args: ['--log-level', 'debug'] });

  it('Probe and the capability calls are logged at debug', async () => {
    await routineCalls(csi);
    const { entries } = await csi.server.logWhen((es) => ROUTINE.every((m) => rpcLines(es, m).length > 0));
    for (const method of ROUTINE) {
      const lines = rpcLines(entries, method);
      expect(lines.length, method).toBeGreaterThan(0);
      expect(lines.every((l) => l.level === 'debug' && l.code === 'OK'), method).toBe(true);
    }
  });

  it('every command and every system call of a block create, stage and unstage is a line with its call\'s method, request id and volume id', async () => {
    const cap = mountCap('ext4');
    await csi.ctl('CreateVolume', { name: 'l-blk', volume_capabilities: [cap], capacity_range: size(32 * MiB), parameters: { backend: 'block' } });
    await csi.ctl('ControllerPublishVolume', { volume_id: 'l-blk', node_id: 'node-a', volume_capability: cap });
    const staging = stagingPath(csi.s.kubeletDir, 'l-blk');
    mkdirSync(staging, { recursive: true });
    await csi.node('NodeStageVolume', { volume_id: 'l-blk', staging_target_path: staging, volume_capability: cap });
    await csi.node('NodeUnstageVolume', { volume_id: 'l-blk', staging_target_path: staging });
    const { entries } = await csi.server.logWhen((es) => rpcLines(es, 'NodeUnstageVolume').length > 0);

    const [stage] = rpcLines(entries, 'NodeStageVolume');
    expect(stage).toMatchObject({ level: 'info', code: 'OK', volumeId: 'l-blk', requestId: expect.stringMatching(UUID) });
    // The filesystem is made at create; the stage binds a loop device and mounts it, both system calls
    // (shared/native-mount.ts): no command, a line for each call with the stage's ids.
    expect(entries.filter((e) => e.msg === 'command' && e.requestId === stage?.requestId)).toEqual([]);
    const image = join(csi.s.dataRoot, 'volumes/l-blk/image.img');
    expect(entries.filter((e) => e.msg === 'system call' && e.requestId === stage?.requestId)).toEqual([
      expect.objectContaining({ level: 'debug', method: 'NodeStageVolume', volumeId: 'l-blk', call: 'ioctl', target: image, options: ['LOOP_CONFIGURE', 'autoclear'] }),
      expect.objectContaining({ level: 'debug', method: 'NodeStageVolume', volumeId: 'l-blk', call: 'mount', source: expect.stringMatching(/^\/dev\/loop\d+$/), fsType: 'ext4', target: staging }),
    ]);
    // The create's own command carries the create's id, not the stage's.
    const [create] = rpcLines(entries, 'CreateVolume');
    const createCommands = entries.filter((e) => e.msg === 'command' && e.requestId === create?.requestId);
    expect(createCommands.map((c) => c.tool)).toEqual(['mkfs.ext4']);
    expect(createCommands.every((c) => c.method === 'CreateVolume' && c.volumeId === 'l-blk')).toBe(true);
    for (const c of createCommands) {
      expect(c).toMatchObject({ level: 'debug', exitCode: expect.any(Number), durationMs: expect.any(Number), failed: false });
      expect(Array.isArray(c.args)).toBe(true);
    }
    // The unstage's unmount is a system call (shared/native-mount.ts): no command line, a system call
    // line in its place, with the call's ids and the staging path (not a /proc/self/fd path).
    const [unstage] = rpcLines(entries, 'NodeUnstageVolume');
    expect(entries.filter((e) => e.msg === 'command' && e.requestId === unstage?.requestId)).toEqual([]);
    const calls = entries.filter((e) => e.msg === 'system call' && e.requestId === unstage?.requestId);
    expect(calls).toEqual([
      expect.objectContaining({ level: 'debug', method: 'NodeUnstageVolume', volumeId: 'l-blk', call: 'umount2', target: staging, options: ['nofollow'], durationMs: expect.any(Number) }),
    ]);
    expect(calls[0]).not.toHaveProperty('error');
    // No trace lines at debug: the request dumps are trace only.
    expect(entries.filter((e) => e.level === 'trace')).toEqual([]);
    await csi.ctl('ControllerUnpublishVolume', { volume_id: 'l-blk', node_id: 'node-a' });
  });
});
