// A rolling upgrade of the CSI node plugin (docs/architecture.md, State): the older release stages and
// publishes, the node plugin is replaced by this one on the same state dir and kubelet dir, and kubelet
// repeats its calls, then tears down. Also the reverse, for a rollback.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { VolumeCapability } from '../../csi/csi-types.js';
import { expectCode, type Partial2 } from '../csi/helpers/client.js';
import { loopDevices } from '../../shared/index.js';
import { blockCap, MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { createCsiScratch, type CsiScratch } from '../csi/helpers/scratch.js';
import type { RunningCsi } from '../csi/helpers/server.js';
import { loopsLeftUnder, mountsUnder } from '../helpers/scratch.js';
import { metricsPort, scrape } from '../csi/metrics-scrape.js';
import { PAIRS, type Release, SKIP_WHY, statusOf, suiteTitle, useReleases, csiServers, movesWithTool, scratchParent } from './releases.js';

let s: CsiScratch;
const servers = csiServers(() => s, () => ['--metrics-address', '127.0.0.1:0']);

/**
 * The tools a server ran for mounts and loop devices, and the system calls its mount addon made, by
 * its metrics (the same series in both releases): no mount(8) or umount(8) means the addon beside the
 * executable, whichever release built it, made and undid every mount.
 */
async function mountWork(server: RunningCsi): Promise<{ tools: string[]; systemCalls: number }> {
  const samples = await scrape(await metricsPort(server));
  const tools = [...samples.keys()].filter((k) => k.startsWith('twinvol_commands_total{')).map((k) => /tool="([^"]*)"/.exec(k)?.[1] ?? k);
  const systemCalls = [...samples].filter(([k]) => k.startsWith('twinvol_system_calls_total{')).reduce((n, [, v]) => n + v, 0);
  return { tools: tools.filter((t) => t === 'mount' || t === 'umount').sort(), systemCalls };
}
beforeEach(() => {
  s = createCsiScratch('node-a');
});
afterEach(async () => {
  await servers.stop();
  s.cleanup();
});

const serve = (release: Release) => servers.serve(release);

interface Kind {
  id: string;
  backend: 'dir' | 'block';
  cap: Partial2<VolumeCapability>;
  readonly: boolean;
  /** ControllerPublishVolume readonly: the node is held to reading (shared/core/staging.ts readOnlyIfAttachedSo). */
  attachedReadOnly?: boolean;
}
const RAW_RO: Kind = { id: 'vol-raw-ro', backend: 'block', cap: blockCap(), readonly: true };
const KINDS: Kind[] = [
  { id: 'vol-dir', backend: 'dir', cap: mountCap('', 'SINGLE_NODE_WRITER', { mount_flags: ['nosuid', 'nodev'], volume_mount_group: '3000' }), readonly: false },
  { id: 'vol-fs', backend: 'block', cap: mountCap('ext4', 'SINGLE_NODE_WRITER', { mount_flags: ['noexec'] }), readonly: false },
  { id: 'vol-fs-ro', backend: 'block', cap: mountCap('ext4'), readonly: true },
  RAW_RO,
  { id: 'vol-att-ro', backend: 'block', cap: mountCap('ext4'), readonly: false, attachedReadOnly: true },
  { id: 'vol-raw-att-ro', backend: 'block', cap: blockCap(), readonly: false, attachedReadOnly: true },
];

function calls(k: Kind) {
  const staging = stagingPath(s.kubeletDir, k.id);
  const target = targetPath(s.kubeletDir, `pod-${k.id}`, k.id);
  return {
    stage: { volume_id: k.id, staging_target_path: staging, volume_capability: k.cap },
    publish: { volume_id: k.id, staging_target_path: staging, target_path: target, volume_capability: k.cap, readonly: k.readonly },
    unpublish: { volume_id: k.id, target_path: target },
    unstage: { volume_id: k.id, staging_target_path: staging },
    staging,
    target,
  };
}

/** The CO's way in: create, attach, stage, publish. */
async function setUp(csi: RunningCsi, k: Kind): Promise<void> {
  const ctl = csi.client;
  await ctl.call('Controller', 'CreateVolume', { name: k.id, volume_capabilities: [k.cap], parameters: { backend: k.backend }, capacity_range: size(32 * MiB) });
  await ctl.call('Controller', 'ControllerPublishVolume', { volume_id: k.id, node_id: 'node-a', volume_capability: k.cap, readonly: Boolean(k.attachedReadOnly) });
  const c = calls(k);
  mkdirSync(c.staging, { recursive: true });
  mkdirSync(dirname(c.target), { recursive: true });
  await ctl.call('Node', 'NodeStageVolume', c.stage);
  await ctl.call('Node', 'NodePublishVolume', c.publish);
}

/**
 * kubelet's repeats (after its own restart, or the plugin's), then the teardown. `refused`: the repeats
 * are ALREADY_EXISTS, naming the read-only staging or publish the other release made.
 */
async function repeatAndTearDown(csi: RunningCsi, k: Kind, refused = false): Promise<void> {
  const c = calls(k);
  for (const repeat of [() => csi.client.call('Node', 'NodeStageVolume', c.stage), () => csi.client.call('Node', 'NodePublishVolume', c.publish)])
    if (refused) expect(await expectCode(repeat(), 'ALREADY_EXISTS')).toContain('read-only');
    else await repeat();
  await csi.client.call('Node', 'NodeUnpublishVolume', c.unpublish);
  await csi.client.call('Node', 'NodeUnstageVolume', c.unstage);
  await csi.client.call('Controller', 'ControllerUnpublishVolume', { volume_id: k.id, node_id: 'node-a' });
}

const records = () => (existsSync(join(s.stateDir, 'mounts')) ? readdirSync(join(s.stateDir, 'mounts')) : []);
const image = (id: string) => join(s.dataRoot, 'volumes', id, 'image.img');

const release = useReleases();

describe.skipIf(SKIP_WHY)(suiteTitle('CSI node plugin across a rolling upgrade'), () => {
  for (const [fromName, toName] of PAIRS) {
    it(`${fromName} stages and publishes, ${toName} repeats and tears down: no mount, loop device or record left`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      const first = await serve(from);
      for (const k of KINDS) await setUp(first, k);
      expect(records()).toHaveLength(KINDS.length * 2);
      // An older release's read-only raw publish binds the staging's writable device: named, as meant
      // (shared/core/inventory.ts writable-read-only-publish); the rest is consistent to both.
      const rawReaders = KINDS.filter((k) => k.cap.block && (k.readonly || k.attachedReadOnly));
      const expected = from.executables === 'old' ? rawReaders.map((k) => `writable-read-only-publish ${calls(k).target}`).sort() : [];
      for (const r of [from, to].filter((r) => r.executables === 'new')) expect(await statusOf(r, s.env)).toEqual({ exitCode: expected.length ? 1 : 0, problems: expected, stderr: '' });

      const set = await mountWork(first);
      const second = await serve(to);
      const rollback = from.executables === 'new' && to.executables === 'old';
      // A rollback's known refusal: the older release stages and publishes as asked, read-write, on a
      // node attached read-only, so it calls the newer one's read-only staging another request's.
      for (const k of KINDS) await repeatAndTearDown(second, k, rollback && k.attachedReadOnly);
      expect(mountsUnder(s.kubeletDir)).toEqual([]);
      expect(records()).toEqual([]);
      for (const [work, r] of [[set, from], [await mountWork(second), to]] as const) {
        expect(work.tools.filter((t) => !(movesWithTool(r) && t === 'mount'))).toEqual([]);
        expect(work.systemCalls).toBeGreaterThan(0);
      }
      if (rollback) {
        // A rollback's known leftover: the read-only device a newer release bound for a raw publish
        // (shared/backends/block.ts readOnlyDevice) is one the older release's unstage does not know
        // (it lets go of one device of the image), so its delete refuses the volume. The newer release's
        // status names the device; losetup -d frees it.
        const left = rawReaders.map((k) => {
          const devices = loopDevices().filter((l) => l.backingFile === image(k.id));
          expect(devices.map((l) => l.readOnly)).toEqual([true]);
          return { id: k.id, device: devices[0]?.device ?? '' };
        });
        for (const { id, device } of left) expect(await expectCode(second.client.call('Controller', 'DeleteVolume', { volume_id: id }), 'FAILED_PRECONDITION')).toContain(device);
        expect((await statusOf(release('new'), s.env)).problems).toEqual(left.map(({ device }) => `loop-without-record ${device}`).sort());
        for (const { device } of left) execFileSync('losetup', ['--detach', device]);
      }
      expect(await loopsLeftUnder(s.root)).toEqual([]);
      for (const k of KINDS) await second.client.call('Controller', 'DeleteVolume', { volume_id: k.id });
      for (const r of [from, to]) expect(await statusOf(r, s.env)).toEqual({ exitCode: 0, problems: [], stderr: '' });
    });
  }
});

describe.skipIf(SKIP_WHY)(suiteTitle('CSI node calls by the two releases in turn'), () => {
  for (const [fromName, toName] of PAIRS) {
    it(`${fromName} stages, ${toName} publishes, ${fromName} unpublishes, ${toName} unstages`, async () => {
      const [a, b] = [release(fromName), release(toName)];
      // Kinds both releases stage alike (the older one stages a read-only attached node read-write).
      const kinds = KINDS.filter((k) => !k.attachedReadOnly);
      const first = await serve(a);
      for (const k of kinds) {
        await first.client.call('Controller', 'CreateVolume', { name: k.id, volume_capabilities: [k.cap], parameters: { backend: k.backend }, capacity_range: size(32 * MiB) });
        await first.client.call('Controller', 'ControllerPublishVolume', { volume_id: k.id, node_id: 'node-a', volume_capability: k.cap });
        mkdirSync(calls(k).staging, { recursive: true });
        mkdirSync(dirname(calls(k).target), { recursive: true });
        await first.client.call('Node', 'NodeStageVolume', calls(k).stage);
      }
      const steps: [Release, (c: RunningCsi['client'], k: Kind) => Promise<unknown>][] = [
        [b, (c, k) => c.call('Node', 'NodePublishVolume', calls(k).publish)],
        [a, (c, k) => c.call('Node', 'NodeStageVolume', calls(k).stage)],
        [a, (c, k) => c.call('Node', 'NodeUnpublishVolume', calls(k).unpublish)],
        [b, (c, k) => c.call('Node', 'NodeUnstageVolume', calls(k).unstage)],
        [b, (c, k) => c.call('Controller', 'ControllerUnpublishVolume', { volume_id: k.id, node_id: 'node-a' })],
        [a, (c, k) => c.call('Controller', 'DeleteVolume', { volume_id: k.id })],
      ];
      for (const [by, step] of steps) {
        const { client } = await serve(by);
        for (const k of kinds) await step(client, k);
      }
      expect(mountsUnder(s.kubeletDir)).toEqual([]);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
      expect(records()).toEqual([]);
    });
  }
});

describe.skipIf(SKIP_WHY)(suiteTitle('CSI inline volumes and node expansion across a rolling upgrade'), () => {
  const inline = (id: string, backend: string, mode: 'SINGLE_NODE_WRITER' | 'SINGLE_NODE_READER_ONLY') => ({
    volume_id: id,
    target_path: targetPath(s.kubeletDir, `pod-${id}`, 'scratch'),
    volume_capability: mountCap('', mode),
    volume_context: { 'csi.storage.k8s.io/ephemeral': 'true', 'csi.storage.k8s.io/pod.name': `pod-${id}`, backend, size: '16Mi' },
    readonly: false,
  });
  const inlineVolumes = () => [inline('csi-inl-dir', 'dir', 'SINGLE_NODE_WRITER'), inline('csi-inl-blk', 'block', 'SINGLE_NODE_WRITER'), inline('csi-inl-rox', 'dir', 'SINGLE_NODE_READER_ONLY')];

  for (const [fromName, toName] of PAIRS) {
    it(`${fromName} publishes inline volumes, ${toName} repeats and unpublishes them: each volume goes with its pod`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      const INLINE = inlineVolumes();
      const first = await serve(from);
      for (const req of INLINE) await first.client.call('Node', 'NodePublishVolume', req);
      const second = await serve(to);
      for (const req of INLINE) {
        // A rollback's known refusal: the older release published a reader-only inline volume as
        // readonly said, and so calls the newer one's read-only publish another request's.
        if (req.volume_id === 'csi-inl-rox' && from.executables === 'new' && to.executables === 'old')
          expect(await expectCode(second.client.call('Node', 'NodePublishVolume', req), 'ALREADY_EXISTS')).toContain('read-only');
        else await second.client.call('Node', 'NodePublishVolume', req);
      }
      for (const req of INLINE) await second.client.call('Node', 'NodeUnpublishVolume', { volume_id: req.volume_id, target_path: req.target_path });
      expect(mountsUnder(s.root).filter((m) => m !== scratchParent(s.stateDir))).toEqual([]);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
      expect(records()).toEqual([]);
      expect((await second.client.call('Controller', 'ListVolumes', {})).entries).toEqual([]);
    });

    it(`${toName} expands a volume ${fromName} staged; ${fromName}, staging it again, grows its filesystem`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      const k: Kind = { id: 'vol-grow', backend: 'block', cap: mountCap('ext4'), readonly: false };
      await setUp(await serve(from), k);
      const next = await serve(to);
      const grown = { required_bytes: String(64 * MiB), limit_bytes: '0' };
      expect(await next.client.call('Controller', 'ControllerExpandVolume', { volume_id: k.id, capacity_range: grown, volume_capability: k.cap })).toMatchObject({ node_expansion_required: true });
      // A kubelet restart repeats the stage before it expands: a repeat over a filesystem due to grow.
      // (The online growth NodeExpandVolume asks of ext4 needs CAP_SYS_RESOURCE, which a test host may lack.)
      await next.client.call('Node', 'NodeStageVolume', calls(k).stage);
      await next.client.call('Node', 'NodeUnpublishVolume', calls(k).unpublish);
      await next.client.call('Node', 'NodeUnstageVolume', calls(k).unstage);
      const back = await serve(from);
      await back.client.call('Node', 'NodeStageVolume', calls(k).stage);
      await back.client.call('Node', 'NodePublishVolume', calls(k).publish);
      const stats = await back.client.call('Node', 'NodeGetVolumeStats', { volume_id: k.id, volume_path: calls(k).target });
      expect(Number(stats.usage.find((u) => u.unit === 'BYTES')?.total)).toBeGreaterThan(48 * MiB);
      await repeatAndTearDown(back, k);
      await back.client.call('Controller', 'DeleteVolume', { volume_id: k.id });
      expect(await loopsLeftUnder(s.root)).toEqual([]);
      expect(records()).toEqual([]);
    });
  }
});
