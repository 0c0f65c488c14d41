import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { MiB, mountCap, size, stagingPath, targetPath } from './helpers/requests.js';
import { createCsiScratch, type CsiScratch } from './helpers/scratch.js';
import { runCsiOnce, scratchArgs, serverEnv } from './helpers/server.js';
import { growth, metricsPort, type Samples, scrape, series } from './metrics-scrape.js';

/**
 * The CSI server's Prometheus endpoint (csi/metrics.ts), scraped over HTTP from the real bundle after
 * real calls on real mounts. Counts are compared exactly, as growth between two scrapes: launchCsi's
 * readiness Probes come before the first one, and nothing else calls this server.
 */
const csi = useCsiServer({ args: ['--metrics-address', '127.0.0.1:0'] });
let port = 0;
beforeAll(async () => {
  port = await metricsPort(csi.server);
});

const CALLS = 'twinvol_csi_calls_total';
const volumes = (s: Samples, backend: string, state: string) => s.get(series('twinvol_volumes', { backend, state }));

describe('metrics after real calls', () => {
  const cap = mountCap('ext4');
  const staging = () => stagingPath(csi.s.kubeletDir, 'm-blk');
  const target = () => targetPath(csi.s.kubeletDir, 'pod-m', 'm-blk');

  it('counts calls by method and code, times each, and counts the commands and system calls a block create and stage made', async () => {
    const before = await scrape(port);
    await csi.ctl('CreateVolume', { name: 'm-blk', volume_capabilities: [cap], capacity_range: size(32 * MiB), parameters: { backend: 'block' } });
    await expectCode(csi.ctl('CreateVolume', { name: 'm-bad', volume_capabilities: [cap], parameters: { backend: 'nonsense' } }), 'INVALID_ARGUMENT');
    await expectCode(csi.ctl('ControllerGetVolume', { volume_id: 'm-none' }), 'NOT_FOUND');
    await expectCode(csi.ctl('ControllerGetVolume', { volume_id: 'm-none' }), 'NOT_FOUND');
    const detached = await scrape(port);
    await csi.ctl('ControllerPublishVolume', { volume_id: 'm-blk', node_id: 'node-a', volume_capability: cap });
    const attached = await scrape(port);
    mkdirSync(staging(), { recursive: true });
    await csi.node('NodeStageVolume', { volume_id: 'm-blk', staging_target_path: staging(), volume_capability: cap });
    await csi.node('NodePublishVolume', { volume_id: 'm-blk', staging_target_path: staging(), target_path: target(), volume_capability: cap });
    for (let i = 0; i < 3; i++) await csi.identity('Probe');
    const after = await scrape(port);

    expect(growth(before, after, CALLS)).toEqual({
      '{method="CreateVolume",code="OK"}': 1,
      '{method="CreateVolume",code="INVALID_ARGUMENT"}': 1,
      '{method="ControllerGetVolume",code="NOT_FOUND"}': 2,
      '{method="ControllerPublishVolume",code="OK"}': 1,
      '{method="NodeStageVolume",code="OK"}': 1,
      '{method="NodePublishVolume",code="OK"}': 1,
      '{method="Probe",code="OK"}': 3,
    });
    // One latency observation per call, whatever its outcome.
    expect(growth(before, after, 'twinvol_csi_call_duration_seconds_count')).toEqual({
      '{method="CreateVolume"}': 2,
      '{method="ControllerGetVolume"}': 2,
      '{method="ControllerPublishVolume"}': 1,
      '{method="NodeStageVolume"}': 1,
      '{method="NodePublishVolume"}': 1,
      '{method="Probe"}': 3,
    });

    // Real commands, each counted and timed: the block volume's filesystem made at create. The stage's
    // loop device and mount, and the publish's bind, are system calls, no command (shared/native-mount.ts).
    const ran = growth(before, after, 'twinvol_commands_total');
    expect(ran['{tool="mkfs.ext4"}']).toBeGreaterThan(0);
    expect(growth(before, after, 'twinvol_command_duration_seconds_count')).toEqual(ran);
    expect(growth(attached, after, 'twinvol_commands_total')).toEqual({});
    // Counted as what they are; none failed over to mount(8).
    expect(growth(before, after, 'twinvol_system_calls_total')).toEqual({ '{call="ioctl"}': 1, '{call="mount"}': 2 });
    expect(growth(before, after, 'twinvol_system_call_failures_total')).toEqual({});
    // None failed. (A create that formats skips blkid at stage, so the "an okExitCode is no failure"
    // rule, blkid's 2, is checked in test/shared/runner.test.ts, not here.)
    expect(growth(before, after, 'twinvol_command_failures_total')).toEqual({});

    // The volume gauge follows the catalog as each scrape reads it.
    expect(volumes(detached, 'block', 'detached')).toBe(1);
    expect(volumes(attached, 'block', 'attached')).toBe(1);
    expect(volumes(after, 'block', 'staged')).toBe(1);
    expect(volumes(after, 'block', 'detached')).toBe(0);
    expect(volumes(after, 'dir', 'detached')).toBe(0);
  });

  it('a stage whose mount fails counts an INTERNAL call and a failed mount, and the gauge follows the teardown', async () => {
    await csi.ctl('CreateVolume', { name: 'm-fail', volume_capabilities: [cap], capacity_range: size(32 * MiB), parameters: { backend: 'block' } });
    await csi.ctl('ControllerPublishVolume', { volume_id: 'm-fail', node_id: 'node-a', volume_capability: cap });
    const failStaging = stagingPath(csi.s.kubeletDir, 'm-fail');
    mkdirSync(failStaging, { recursive: true });
    const before = await scrape(port);
    // ext4 refuses an option it does not know: mount(8) exits 32, for real.
    const badCap = mountCap('ext4', 'SINGLE_NODE_WRITER', { mount_flags: ['twinvol_no_such_option'] });
    await expectCode(csi.node('NodeStageVolume', { volume_id: 'm-fail', staging_target_path: failStaging, volume_capability: badCap }), 'INTERNAL');
    const failed = await scrape(port);
    expect(growth(before, failed, CALLS)).toEqual({ '{method="NodeStageVolume",code="INTERNAL"}': 1 });
    expect(growth(before, failed, 'twinvol_command_failures_total')).toEqual({ '{tool="mount"}': 1 });
    expect(volumes(failed, 'block', 'attached')).toBe(1);

    await csi.node('NodeUnpublishVolume', { volume_id: 'm-blk', target_path: target() });
    await csi.node('NodeUnstageVolume', { volume_id: 'm-blk', staging_target_path: staging() });
    await csi.node('NodeUnstageVolume', { volume_id: 'm-fail', staging_target_path: failStaging });
    for (const id of ['m-blk', 'm-fail']) await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    const after = await scrape(port);
    expect(volumes(after, 'block', 'detached')).toBe(2);
    expect(['attached', 'staged', 'fenced'].map((state) => volumes(after, 'block', state))).toEqual([0, 0, 0]);
    expect(growth(failed, after, CALLS)).toEqual({
      '{method="NodeUnpublishVolume",code="OK"}': 1,
      '{method="NodeUnstageVolume",code="OK"}': 2,
      '{method="ControllerUnpublishVolume",code="OK"}': 2,
    });
  });

  it('serves the process metrics prom-client collects, and only /metrics', async () => {
    const samples = await scrape(port);
    expect(samples.get('process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(samples.get('nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'POST' })).status).toBe(404);
  });
});

describe('--metrics-address and --log-level at start-up', () => {
  let s: CsiScratch;
  let busy: Server | undefined;
  beforeAll(() => {
    s = createCsiScratch('node-a');
  });
  afterAll(async () => {
    await new Promise((r) => (busy ? busy.close(r) : r(undefined)));
    s.cleanup();
  });
  const start = (...extra: string[]) => runCsiOnce([...scratchArgs(s, 'node-a'), ...extra], serverEnv(s));

  // Every accepted and refused form is checked in-process (test/csi/metrics-flags.test.ts); here, what the process does with one.
  it('a bad --metrics-address: one line, exit 2, before the CSI socket is made', async () => {
    const r = await start('--metrics-address', '[::1:9808');
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trimEnd().split('\n')).toEqual(['twinvol-csi: --metrics-address must be host:port with a port from 0 to 65535 (e.g. 0.0.0.0:9810, [::1]:9810, :9810), not "[::1:9808" (see: twinvol-csi --help)']);
    expect(existsSync(s.socketPath)).toBe(false);
  });

  it('--log-level loud: one line, exit 2', async () => {
    const r = await start('--log-level', 'loud');
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n')).toEqual(['twinvol-csi: --log-level must be one of trace, debug, info, warn, error (see: twinvol-csi --help)']);
  });

  it('a port already in use: one line, exit 1, before the CSI socket is made', async () => {
    busy = createServer();
    const taken = await new Promise<number>((done) => busy?.listen(0, '127.0.0.1', () => done((busy?.address() as { port: number }).port)));
    const r = await start('--metrics-address', `127.0.0.1:${taken}`);
    expect(r.code).toBe(1);
    expect(r.stderr.trimEnd().split('\n')).toEqual([`twinvol-csi: cannot serve metrics on 127.0.0.1:${taken}: EADDRINUSE`]);
    expect(existsSync(s.socketPath)).toBe(false);
  });
});
