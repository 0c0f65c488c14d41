import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Client, credentials, type ServiceError } from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { openCore } from '../../shared/core/core.js';
import { mountAt } from '../../shared/mountinfo.js';
import { type CallOutcome, expectCode, outcome, type Rpcs, serviceCall } from './helpers/client.js';
import { deviceSha256, fileSha256, fsTotalBytes, writeRandomDevice, writeRandomFile } from './helpers/data.js';
import { useCsiServer } from './helpers/fixture.js';
import { mountInPod, type ReadyOptions, readyVolume, stagedVolume } from './helpers/pod-mount.js';
import { repeatedOk } from './helpers/repeat.js';
import { blockCap, GiB, MiB, mountCap, size, stagingPath, targetPath } from './helpers/requests.js';
import { loopsLeftUnder } from '../helpers/scratch.js';
import { createCsiScratch, type CsiScratch, mountsBelow } from './helpers/scratch.js';
import { runCsiOnce, serverEnv } from './helpers/server.js';
import { treeOf } from './helpers/tree.js';

/**
 * The CSI v1.12 spec's rules (csi/README.md), item by item, where the other suites leave a rule untested or
 * test it only in part. Every server here is the real bundle on a scratch world; the fixture stops
 * it and unmounts, detaches and deletes everything in afterAll, whether the tests passed or not.
 */
const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;
const group = serviceCall(() => csi.client, 'GroupController');

const ready = (id: string, opts?: ReadyOptions) => readyVolume(csi, id, opts);
const staged = (id: string, opts?: ReadyOptions) => stagedVolume(csi, id, opts);

const logLinesWhen = (want: Parameters<typeof csi.server.logWhen>[0]) => csi.server.logWhen(want);

/** The enum values csi.proto v1.12.0 defines (container-storage-interface/spec), UNKNOWN left out. */
const SPEC = {
  pluginService: ['CONTROLLER_SERVICE', 'VOLUME_ACCESSIBILITY_CONSTRAINTS', 'GROUP_CONTROLLER_SERVICE', 'SNAPSHOT_METADATA_SERVICE'],
  volumeExpansion: ['ONLINE', 'OFFLINE'],
  controller: [
    'CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME', 'LIST_VOLUMES', 'GET_CAPACITY', 'CREATE_DELETE_SNAPSHOT', 'LIST_SNAPSHOTS',
    'CLONE_VOLUME', 'PUBLISH_READONLY', 'EXPAND_VOLUME', 'LIST_VOLUMES_PUBLISHED_NODES', 'VOLUME_CONDITION', 'GET_VOLUME',
    'SINGLE_NODE_MULTI_WRITER', 'MODIFY_VOLUME', 'GET_SNAPSHOT',
  ],
  node: ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION', 'SINGLE_NODE_MULTI_WRITER', 'VOLUME_MOUNT_GROUP'],
};

/** Every RPC of csi/proto/csi.proto, by service. */
const IDENTITY_RPCS = ['GetPluginInfo', 'GetPluginCapabilities', 'Probe'] as const;
const CONTROLLER_RPCS = [
  'CreateVolume', 'DeleteVolume', 'ControllerPublishVolume', 'ControllerUnpublishVolume', 'ValidateVolumeCapabilities', 'ListVolumes',
  'GetCapacity', 'ControllerGetCapabilities', 'CreateSnapshot', 'DeleteSnapshot', 'ListSnapshots', 'ControllerExpandVolume',
  'ControllerGetVolume', 'ControllerModifyVolume', 'GetSnapshot',
] as const satisfies readonly (keyof Rpcs['Controller'])[];
const GROUP_RPCS = [
  'GroupControllerGetCapabilities', 'CreateVolumeGroupSnapshot', 'GetVolumeGroupSnapshot', 'DeleteVolumeGroupSnapshot',
] as const satisfies readonly (keyof Rpcs['GroupController'])[];
const NODE_RPCS = [
  'NodeStageVolume', 'NodeUnstageVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeGetVolumeStats', 'NodeExpandVolume',
  'NodeGetCapabilities', 'NodeGetInfo',
] as const satisfies readonly (keyof Rpcs['Node'])[];

describe('transport and identity', () => {
  it('answers on /csi.v1.<Service>/<Method> paths, and UNIMPLEMENTED on any other package', async () => {
    const raw = new Client(`unix://${csi.s.socketPath}`, credentials.createInsecure());
    const call = (path: string) =>
      new Promise<Buffer>((done, fail) =>
        raw.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), (err: ServiceError | null, value?: Buffer) => (err ? fail(err) : done(value!))),
      );
    try {
      expect((await call('/csi.v1.Identity/GetPluginInfo')).toString('latin1')).toContain('csi.twinvol.io');
      expect((await outcome(call('/csi.v0.Identity/GetPluginInfo'))).code).toBe('UNIMPLEMENTED');
    } finally {
      raw.close();
    }
  });

  it('creates nothing beside its socket', async () => {
    await csi.identity('Probe');
    expect(lstatSync(csi.s.socketPath).isSocket()).toBe(true);
    expect(readdirSync(dirname(csi.s.socketPath))).toEqual(['csi.sock']);
  });

  it('reports a vendor_version and a name that follow the GetPluginInfo rules', async () => {
    const info = await csi.identity('GetPluginInfo');
    expect(info.vendor_version).toMatch(/^\S+$/);
    expect(info.name.length).toBeLessThanOrEqual(63);
    expect(info.name).toMatch(/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/);
  });

  it('advertises only capability values the CSI spec defines', async () => {
    const plugin = (await csi.identity('GetPluginCapabilities')).capabilities;
    expect(plugin.length).toBeGreaterThan(0);
    for (const c of plugin) {
      if ('service' in c && c.service) expect(SPEC.pluginService).toContain(c.service.type);
      else expect(SPEC.volumeExpansion).toContain((c as { volume_expansion: { type: string } }).volume_expansion.type);
    }
    const controller = (await ctl('ControllerGetCapabilities')).capabilities.map((c) => c.rpc.type);
    const nodeCaps = (await node('NodeGetCapabilities')).capabilities.map((c) => c.rpc.type);
    expect(controller.length).toBeGreaterThan(0);
    expect(nodeCaps.length).toBeGreaterThan(0);
    for (const t of controller) expect(SPEC.controller).toContain(t);
    for (const t of nodeCaps) expect(SPEC.node).toContain(t);
    // MODIFY_VOLUME is a spec value, but ControllerModifyVolume is not implemented: not advertised.
    expect(controller).not.toContain('MODIFY_VOLUME');
    expect(new Set(controller).size).toBe(controller.length);
  });

  it('serves every RPC the spec lists: an empty request is never INTERNAL, only ControllerModifyVolume is UNIMPLEMENTED', async () => {
    const answers: Record<string, CallOutcome> = {};
    for (const m of IDENTITY_RPCS) answers[m] = await outcome(csi.identity(m));
    for (const m of CONTROLLER_RPCS) answers[m] = await outcome(ctl(m, {}));
    for (const m of NODE_RPCS) answers[m] = await outcome(node(m, {}));
    for (const m of GROUP_RPCS) answers[m] = await outcome(csi.client.call('GroupController', m, {}));
    const unimplemented = Object.entries(answers).filter(([, o]) => o.code === 'UNIMPLEMENTED').map(([m]) => m);
    expect(unimplemented).toEqual(['ControllerModifyVolume']);
    expect(Object.entries(answers).filter(([, o]) => o.code === 'INTERNAL')).toEqual([]);
    expect(Object.keys(answers)).toHaveLength(30);
  });
});

describe('plugin name rules (--driver-name)', () => {
  const scratches: CsiScratch[] = [];
  afterAll(() => {
    for (const s of scratches.splice(0)) s.cleanup();
  });
  const name63 = `csi.${'a'.repeat(56)}.io`;

  it.each([
    ['64 characters', `${name63}x`],
    ['a dot at the end', 'csi.twinvol.io.'],
    ['a dash at the start', '-csi.twinvol.io'],
    ['an underscore', 'csi_twinvol.io'],
  ])('refuses a name with %s at start-up', async (_what, name) => {
    const s = createCsiScratch('node-a');
    scratches.push(s);
    const r = await runCsiOnce(['--endpoint', `unix://${s.socketPath}`, `--driver-name=${name}`], serverEnv(s));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--driver-name must be a domain-style name');
    expect(existsSync(s.socketPath)).toBe(false);
  });

  describe('a name of exactly 63 characters', () => {
    const named = useCsiServer({ nodeId: 'node-n', args: ['--driver-name', name63] });
    it('is accepted and reported by GetPluginInfo', async () => {
      expect(name63).toHaveLength(63);
      expect((await named.identity('GetPluginInfo')).name).toBe(name63);
    });
  });
});

describe('services not served in a mode answer UNIMPLEMENTED, every one of them', () => {
  describe('--mode node', () => {
    const nodeOnly = useCsiServer({ nodeId: 'node-m', args: ['--mode', 'node'] });
    it('answers UNIMPLEMENTED to every Controller RPC and serves Identity and Node', async () => {
      for (const m of CONTROLLER_RPCS) expect(`${m}: ${(await outcome(nodeOnly.ctl(m, {}))).code}`).toBe(`${m}: UNIMPLEMENTED`);
      for (const m of GROUP_RPCS) expect(`${m}: ${(await outcome(nodeOnly.client.call('GroupController', m, {}))).code}`).toBe(`${m}: UNIMPLEMENTED`);
      expect((await nodeOnly.identity('Probe')).ready?.value).toBe(true);
      expect((await nodeOnly.node('NodeGetInfo')).node_id).toBe('node-m');
      expect((await nodeOnly.node('NodeGetCapabilities')).capabilities.length).toBeGreaterThan(0);
    });
  });
  describe('--mode controller', () => {
    const ctlOnly = useCsiServer({ nodeId: 'node-c', args: ['--mode', 'controller'] });
    it('answers UNIMPLEMENTED to every Node RPC and serves Identity and Controller', async () => {
      for (const m of NODE_RPCS) expect(`${m}: ${(await outcome(ctlOnly.node(m, {}))).code}`).toBe(`${m}: UNIMPLEMENTED`);
      const caps = await ctlOnly.identity('GetPluginCapabilities');
      expect(caps.capabilities.some((c) => 'service' in c && c.service?.type === 'CONTROLLER_SERVICE')).toBe(true);
      expect((await ctlOnly.ctl('ListVolumes', {})).entries).toEqual([]);
    });
  });
});

describe('required fields: each one missing is INVALID_ARGUMENT naming it, and changes nothing', () => {
  it('every RPC with a required field', async () => {
    const { staging, target, cap } = await staged('rf-vol');
    const t = target('pod-rf');
    await node('NodePublishVolume', { volume_id: 'rf-vol', staging_target_path: staging, target_path: t, volume_capability: cap });
    await ctl('CreateSnapshot', { name: 'rf-snap', source_volume_id: 'rf-vol' });
    const before = treeOf(csi.s.root);
    const mountsBefore = mountsBelow(csi.s.root);

    // Each request is complete except for the one field named; complete, each would succeed.
    const cases: [string, string, () => Promise<unknown>][] = [
      ['CreateVolume', 'name', () => ctl('CreateVolume', { volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB) })],
      ['CreateVolume', 'volume_capabilities', () => ctl('CreateVolume', { name: 'rf-new', parameters: { backend: 'dir' }, capacity_range: size(MiB) })],
      ['DeleteVolume', 'volume_id', () => ctl('DeleteVolume', {})],
      ['ControllerPublishVolume', 'volume_id', () => ctl('ControllerPublishVolume', { node_id: 'node-a', volume_capability: cap })],
      ['ControllerPublishVolume', 'node_id', () => ctl('ControllerPublishVolume', { volume_id: 'rf-vol', volume_capability: cap })],
      ['ControllerPublishVolume', 'volume_capability', () => ctl('ControllerPublishVolume', { volume_id: 'rf-vol', node_id: 'node-a' })],
      ['ControllerUnpublishVolume', 'volume_id', () => ctl('ControllerUnpublishVolume', { node_id: 'node-a' })],
      ['ValidateVolumeCapabilities', 'volume_id', () => ctl('ValidateVolumeCapabilities', { volume_capabilities: [cap] })],
      ['ValidateVolumeCapabilities', 'volume_capabilities', () => ctl('ValidateVolumeCapabilities', { volume_id: 'rf-vol' })],
      ['CreateSnapshot', 'name', () => ctl('CreateSnapshot', { source_volume_id: 'rf-vol' })],
      ['CreateSnapshot', 'source_volume_id', () => ctl('CreateSnapshot', { name: 'rf-snap-2' })],
      ['DeleteSnapshot', 'snapshot_id', () => ctl('DeleteSnapshot', {})],
      ['GetSnapshot', 'snapshot_id', () => ctl('GetSnapshot', {})],
      ['ControllerExpandVolume', 'volume_id', () => ctl('ControllerExpandVolume', { capacity_range: size(128 * MiB) })],
      ['ControllerExpandVolume', 'capacity_range', () => ctl('ControllerExpandVolume', { volume_id: 'rf-vol' })],
      ['ControllerGetVolume', 'volume_id', () => ctl('ControllerGetVolume', {})],
      ['NodeStageVolume', 'volume_id', () => node('NodeStageVolume', { staging_target_path: staging, volume_capability: cap })],
      ['NodeStageVolume', 'staging_target_path', () => node('NodeStageVolume', { volume_id: 'rf-vol', volume_capability: cap })],
      ['NodeStageVolume', 'volume_capability', () => node('NodeStageVolume', { volume_id: 'rf-vol', staging_target_path: staging })],
      ['NodeUnstageVolume', 'volume_id', () => node('NodeUnstageVolume', { staging_target_path: staging })],
      ['NodeUnstageVolume', 'staging_target_path', () => node('NodeUnstageVolume', { volume_id: 'rf-vol' })],
      ['NodePublishVolume', 'volume_id', () => node('NodePublishVolume', { staging_target_path: staging, target_path: t, volume_capability: cap })],
      ['NodePublishVolume', 'target_path', () => node('NodePublishVolume', { volume_id: 'rf-vol', staging_target_path: staging, volume_capability: cap })],
      ['NodePublishVolume', 'volume_capability', () => node('NodePublishVolume', { volume_id: 'rf-vol', staging_target_path: staging, target_path: t })],
      ['NodeUnpublishVolume', 'volume_id', () => node('NodeUnpublishVolume', { target_path: t })],
      ['NodeUnpublishVolume', 'target_path', () => node('NodeUnpublishVolume', { volume_id: 'rf-vol' })],
      ['NodeGetVolumeStats', 'volume_id', () => node('NodeGetVolumeStats', { volume_path: t })],
      ['NodeGetVolumeStats', 'volume_path', () => node('NodeGetVolumeStats', { volume_id: 'rf-vol' })],
      ['NodeExpandVolume', 'volume_id', () => node('NodeExpandVolume', { volume_path: t })],
      ['NodeExpandVolume', 'volume_path', () => node('NodeExpandVolume', { volume_id: 'rf-vol' })],
      ['CreateVolumeGroupSnapshot', 'name', () => group('CreateVolumeGroupSnapshot', { source_volume_ids: ['rf-vol'] })],
      ['CreateVolumeGroupSnapshot', 'source_volume_ids', () => group('CreateVolumeGroupSnapshot', { name: 'rf-group' })],
      ['GetVolumeGroupSnapshot', 'group_snapshot_id', () => group('GetVolumeGroupSnapshot', {})],
      ['DeleteVolumeGroupSnapshot', 'group_snapshot_id', () => group('DeleteVolumeGroupSnapshot', {})],
    ];
    const wrong: string[] = [];
    for (const [method, field, call] of cases) {
      const o = await outcome(call());
      if (o.code !== 'INVALID_ARGUMENT' || !o.message.includes(field)) wrong.push(`${method} without ${field}: ${o.code} ${o.message}`);
    }
    expect(wrong).toEqual([]);
    expect(treeOf(csi.s.root)).toEqual(before);
    expect(mountsBelow(csi.s.root)).toEqual(mountsBefore);
    // The complete requests do succeed: the refusals above were about the missing field.
    await node('NodeGetVolumeStats', { volume_id: 'rf-vol', volume_path: t });
    await node('NodeUnpublishVolume', { volume_id: 'rf-vol', target_path: t });
    await node('NodeUnstageVolume', { volume_id: 'rf-vol', staging_target_path: staging });
  });
});

describe('bad ids and names, paths outside the kubelet dir: INVALID_ARGUMENT and nothing touched', () => {
  const BAD_IDS = ['..', '../data', 'a/b', '/abs', 'nul\0byte', 'x'.repeat(129)];

  it('refuses a bad volume, snapshot or node id in every RPC that takes one', async () => {
    const { staging, target, cap } = await staged('bad-id-vol');
    const t = target('pod-bad');
    await node('NodePublishVolume', { volume_id: 'bad-id-vol', staging_target_path: staging, target_path: t, volume_capability: cap });
    const before = treeOf(csi.s.root);
    const mountsBefore = mountsBelow(csi.s.root);
    const wrong: string[] = [];
    for (const bad of BAD_IDS) {
      const calls: [string, () => Promise<unknown>][] = [
        ['CreateVolume source volume', () => ctl('CreateVolume', { name: 'bad-src', volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB), volume_content_source: { volume: { volume_id: bad } } })],
        ['CreateVolume source snapshot', () => ctl('CreateVolume', { name: 'bad-src', volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB), volume_content_source: { snapshot: { snapshot_id: bad } } })],
        ['DeleteVolume', () => ctl('DeleteVolume', { volume_id: bad })],
        ['ControllerPublishVolume volume', () => ctl('ControllerPublishVolume', { volume_id: bad, node_id: 'node-a', volume_capability: cap })],
        ['ControllerUnpublishVolume volume', () => ctl('ControllerUnpublishVolume', { volume_id: bad, node_id: 'node-a' })],
        ['ValidateVolumeCapabilities', () => ctl('ValidateVolumeCapabilities', { volume_id: bad, volume_capabilities: [cap] })],
        ['ControllerExpandVolume', () => ctl('ControllerExpandVolume', { volume_id: bad, capacity_range: size(128 * MiB) })],
        ['ControllerGetVolume', () => ctl('ControllerGetVolume', { volume_id: bad })],
        ['CreateSnapshot source', () => ctl('CreateSnapshot', { name: 'bad-snap', source_volume_id: bad })],
        ['DeleteSnapshot', () => ctl('DeleteSnapshot', { snapshot_id: bad })],
        ['GetSnapshot', () => ctl('GetSnapshot', { snapshot_id: bad })],
        ['NodeStageVolume', () => node('NodeStageVolume', { volume_id: bad, staging_target_path: staging, volume_capability: cap })],
        ['NodeUnstageVolume', () => node('NodeUnstageVolume', { volume_id: bad, staging_target_path: staging })],
        ['NodePublishVolume', () => node('NodePublishVolume', { volume_id: bad, staging_target_path: staging, target_path: t, volume_capability: cap })],
        ['NodeUnpublishVolume', () => node('NodeUnpublishVolume', { volume_id: bad, target_path: t })],
        ['NodeGetVolumeStats', () => node('NodeGetVolumeStats', { volume_id: bad, volume_path: t })],
        ['NodeExpandVolume', () => node('NodeExpandVolume', { volume_id: bad, volume_path: t })],
      ];
      // A name may be any Unicode without control characters (its id is derived: shared/names.ts).
      if (bad.includes('\0') || Buffer.byteLength(bad) > 128) {
        calls.push(['CreateVolume name', () => ctl('CreateVolume', { name: bad, volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB) })]);
        calls.push(['CreateSnapshot name', () => ctl('CreateSnapshot', { name: bad, source_volume_id: 'bad-id-vol' })]);
      }
      // Node names may be 253 bytes (Kubernetes object names): only the other bad forms apply to them.
      if (Buffer.byteLength(bad) <= 128) {
        calls.push(['ControllerPublishVolume node', () => ctl('ControllerPublishVolume', { volume_id: 'bad-id-vol', node_id: bad, volume_capability: cap })]);
        calls.push(['ControllerUnpublishVolume node', () => ctl('ControllerUnpublishVolume', { volume_id: 'bad-id-vol', node_id: bad })]);
      }
      for (const [what, call] of calls) {
        const o = await outcome(call());
        if (o.code !== 'INVALID_ARGUMENT') wrong.push(`${what} ${JSON.stringify(bad.slice(0, 12))}: ${o.code} ${o.message}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(treeOf(csi.s.root)).toEqual(before);
    expect(mountsBelow(csi.s.root)).toEqual(mountsBefore);
    expect((await ctl('ControllerGetVolume', { volume_id: 'bad-id-vol' })).status.published_node_ids).toEqual(['node-a']);
    await node('NodeUnpublishVolume', { volume_id: 'bad-id-vol', target_path: t });
    await node('NodeUnstageVolume', { volume_id: 'bad-id-vol', staging_target_path: staging });
  });

  it('refuses a node id longer than 253 bytes', async () => {
    await ctl('CreateVolume', { name: 'long-node', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    await expectCode(ctl('ControllerPublishVolume', { volume_id: 'long-node', node_id: 'n'.repeat(254), volume_capability: mountCap() }), 'INVALID_ARGUMENT');
    expect((await ctl('ControllerGetVolume', { volume_id: 'long-node' })).status.published_node_ids).toEqual([]);
  });

  it('never unmounts or removes a path outside the kubelet dir, however it is named', async () => {
    const { staging, cap } = await staged('out-vol');
    // A real mount outside the kubelet dir, and a link inside the kubelet dir that leads to it.
    const outside = join(csi.s.root, 'outside');
    const mnt = join(outside, 'mnt');
    mkdirSync(mnt, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'twinvol-outside', mnt]);
    writeFileSync(join(mnt, 'keep.txt'), 'keep');
    mkdirSync(join(csi.s.kubeletDir, 'pods'), { recursive: true });
    symlinkSync(outside, join(csi.s.kubeletDir, 'pods/evil'));
    const viaLink = join(csi.s.kubeletDir, 'pods/evil/mnt');
    const paths = [mnt, `${csi.s.kubeletDir}/../outside/mnt`, viaLink, 'outside/mnt'];
    const wrong: string[] = [];
    for (const p of paths) {
      const calls: [string, () => Promise<unknown>][] = [
        ['NodeUnpublishVolume', () => node('NodeUnpublishVolume', { volume_id: 'out-vol', target_path: p })],
        ['NodeUnstageVolume', () => node('NodeUnstageVolume', { volume_id: 'out-vol', staging_target_path: p })],
        ['NodeGetVolumeStats', () => node('NodeGetVolumeStats', { volume_id: 'out-vol', volume_path: p })],
        ['NodeExpandVolume', () => node('NodeExpandVolume', { volume_id: 'out-vol', volume_path: p })],
        ['NodePublishVolume target', () => node('NodePublishVolume', { volume_id: 'out-vol', staging_target_path: staging, target_path: `${p}/t`, volume_capability: cap })],
        ['NodeStageVolume', () => node('NodeStageVolume', { volume_id: 'out-vol', staging_target_path: `${p}/s`, volume_capability: cap })],
      ];
      for (const [what, call] of calls) {
        const o = await outcome(call());
        // Stats and expansion only look the path up among the volume's records (they never resolve or
        // touch it): a path outside is simply not where the volume is, NOT_FOUND as the spec says.
        const allowed = what === 'NodeExpandVolume' || what === 'NodeGetVolumeStats' ? ['NOT_FOUND'] : ['INVALID_ARGUMENT'];
        if (!allowed.includes(o.code)) wrong.push(`${what} ${p}: ${o.code} ${o.message}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(mountAt(mnt)?.source).toBe('twinvol-outside');
    expect(readdirSync(mnt)).toEqual(['keep.txt']);
    execFileSync('umount', [mnt]);
    await node('NodeUnstageVolume', { volume_id: 'out-vol', staging_target_path: staging });
  });
});

describe('strings of 128 bytes and maps of 4 KiB are accepted everywhere', () => {
  const map4k = (prefix: string) => ({ [`${prefix}a`]: 'a'.repeat(2000), [`${prefix}b`]: 'b'.repeat(2000) });

  it('a 128-byte volume id goes through the whole lifecycle with 4 KiB secrets and contexts', async () => {
    const id = `v${'1'.repeat(127)}`;
    const cap = mountCap();
    const secrets = map4k('k');
    await ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB), secrets });
    const staging = stagingPath(csi.s.kubeletDir, id);
    const t = targetPath(csi.s.kubeletDir, 'pod-long', id);
    mkdirSync(staging, { recursive: true });
    const co = map4k('csi.storage.k8s.io/');
    await ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap, secrets, volume_context: co });
    const validated = await ctl('ValidateVolumeCapabilities', { volume_id: id, volume_capabilities: [cap], volume_context: co, parameters: co, secrets });
    expect(validated.message).toBe('');
    await node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap, secrets, volume_context: co, publish_context: map4k('p') });
    await node('NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: t, volume_capability: cap, secrets, volume_context: co, publish_context: map4k('p') });
    const digest = writeRandomFile(join(t, 'f.bin'), 4096);
    expect(fileSha256(join(csi.s.dataRoot, 'volumes', id, 'data/f.bin'))).toBe(digest);
    expect((await node('NodeGetVolumeStats', { volume_id: id, volume_path: t })).volume_condition.abnormal).toBe(false);
    await node('NodeUnpublishVolume', { volume_id: id, target_path: t });
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a', secrets });
    await ctl('DeleteVolume', { volume_id: id, secrets });
    expect(existsSync(join(csi.s.dataRoot, 'volumes', id))).toBe(false);
  });

  it('a 128-byte snapshot name and node id, 4 KiB snapshot parameters and secrets', async () => {
    await ctl('CreateVolume', { name: 'long-src', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const name = `s${'2'.repeat(127)}`;
    const snap = await ctl('CreateSnapshot', { name, source_volume_id: 'long-src', parameters: map4k('csi.storage.k8s.io/'), secrets: map4k('k') });
    expect(snap.snapshot.snapshot_id).toBe(name);
    expect((await ctl('GetSnapshot', { snapshot_id: name })).snapshot.snapshot_id).toBe(name);
    await ctl('DeleteSnapshot', { snapshot_id: name, secrets: map4k('k') });
    const nodeId = `n${'3'.repeat(127)}`;
    await csi.registerNodes(nodeId);
    await ctl('ControllerPublishVolume', { volume_id: 'long-src', node_id: nodeId, volume_capability: mountCap() });
    expect((await ctl('ControllerGetVolume', { volume_id: 'long-src' })).status.published_node_ids).toEqual([nodeId]);
    await ctl('ControllerUnpublishVolume', { volume_id: 'long-src', node_id: nodeId });
  });
});

describe('secrets never reach the log', () => {
  // Key names a redaction list would not guess, so only "never logged at all" passes.
  const KEY = 'acmeKey7f3a';
  const VALUE = 'v4lue-7f3a-MUST-NOT-LEAK';
  const secrets = { [KEY]: VALUE, 'other-k-9c1e': 'other-v-9c1e' };

  it('in CreateVolume, ControllerPublishVolume, NodeStageVolume and NodePublishVolume, answered OK or not', async () => {
    const cap = mountCap();
    await ctl('CreateVolume', { name: 'sec-vol', volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB), secrets });
    await expectCode(ctl('CreateVolume', { name: 'sec-vol', volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(2 * MiB), secrets }), 'ALREADY_EXISTS');
    await ctl('ControllerPublishVolume', { volume_id: 'sec-vol', node_id: 'node-a', volume_capability: cap, secrets });
    await csi.registerNodes('node-b');
    await expectCode(ctl('ControllerPublishVolume', { volume_id: 'sec-vol', node_id: 'node-b', volume_capability: cap, secrets }), 'FAILED_PRECONDITION');
    const staging = stagingPath(csi.s.kubeletDir, 'sec-vol');
    mkdirSync(staging, { recursive: true });
    await expectCode(node('NodeStageVolume', { volume_id: 'sec-vol', staging_target_path: staging, volume_capability: cap, secrets, volume_context: { source: VALUE } }), 'INVALID_ARGUMENT');
    await node('NodeStageVolume', { volume_id: 'sec-vol', staging_target_path: staging, volume_capability: cap, secrets });
    const t = targetPath(csi.s.kubeletDir, 'pod-sec', 'sec-vol');
    await expectCode(node('NodePublishVolume', { volume_id: 'sec-vol', target_path: t, volume_capability: cap, secrets }), 'FAILED_PRECONDITION');
    await node('NodePublishVolume', { volume_id: 'sec-vol', staging_target_path: staging, target_path: t, volume_capability: cap, secrets });
    await node('NodeUnpublishVolume', { volume_id: 'sec-vol', target_path: t });
    await node('NodeUnstageVolume', { volume_id: 'sec-vol', staging_target_path: staging });
    await ctl('ControllerUnpublishVolume', { volume_id: 'sec-vol', node_id: 'node-a' });

    const methods = ['CreateVolume', 'ControllerPublishVolume', 'NodeStageVolume', 'NodePublishVolume'];
    const { text, entries } = await logLinesWhen((es) => methods.every((m) => es.filter((e) => e.method === m && e.volumeId === 'sec-vol').length >= 2));
    // The calls were logged (so the check below looks at them), OK and refused ones alike...
    for (const m of methods) {
      const codes = entries.filter((e) => e.method === m && e.volumeId === 'sec-vol').map((e) => e.code);
      expect(codes, m).toContain('OK');
      expect(codes.filter((c) => c !== 'OK'), m).toHaveLength(1);
    }
    // ...and no line holds a secret's key or value.
    for (const s of [KEY, VALUE, 'other-k-9c1e', 'other-v-9c1e', '7f3a']) expect(text).not.toContain(s);
  });
});

describe('CreateVolume: the same name with another content source is ALREADY_EXISTS', () => {
  it('snapshot vs volume vs none, while the identical request answers the same volume', async () => {
    const dir = { backend: 'dir' };
    await ctl('CreateVolume', { name: 'cs-a', volume_capabilities: [mountCap()], parameters: dir, capacity_range: size(MiB) });
    await ctl('CreateVolume', { name: 'cs-b', volume_capabilities: [mountCap()], parameters: dir, capacity_range: size(MiB) });
    await ctl('CreateSnapshot', { name: 'cs-snap', source_volume_id: 'cs-a' });
    const base = { name: 'cs-new', volume_capabilities: [mountCap()], parameters: dir, capacity_range: size(MiB) };
    const fromSnap = { ...base, volume_content_source: { snapshot: { snapshot_id: 'cs-snap' } } };
    const first = await repeatedOk('CreateVolume from snapshot', () => ctl('CreateVolume', fromSnap));
    expect(first.volume.content_source).toEqual({ snapshot: { snapshot_id: 'cs-snap' }, type: 'snapshot' });
    for (const other of [base, { ...base, volume_content_source: { volume: { volume_id: 'cs-a' } } }])
      expect(await expectCode(ctl('CreateVolume', other), 'ALREADY_EXISTS')).toContain('content source');
    // And the other way round: made without a source, asked again with one.
    await expectCode(ctl('CreateVolume', { ...base, name: 'cs-b', volume_content_source: { volume: { volume_id: 'cs-a' } } }), 'ALREADY_EXISTS');
    expect((await ctl('ControllerGetVolume', { volume_id: 'cs-b' })).volume.content_source).toBeNull();
  });
});

describe('re-stage and re-publish with an incompatible capability: ALREADY_EXISTS', () => {
  it('mount vs block and read-write vs read-only at the same path', async () => {
    const { staging, target, cap } = await staged('inc-vol', { backend: 'block', bytes: 16 * MiB });
    await expectCode(node('NodeStageVolume', { volume_id: 'inc-vol', staging_target_path: staging, volume_capability: blockCap() }), 'ALREADY_EXISTS');
    await expectCode(node('NodeStageVolume', { volume_id: 'inc-vol', staging_target_path: staging, volume_capability: mountCap('', 'SINGLE_NODE_READER_ONLY') }), 'ALREADY_EXISTS');
    const t = target('pod-inc');
    await node('NodePublishVolume', { volume_id: 'inc-vol', staging_target_path: staging, target_path: t, volume_capability: cap });
    await expectCode(node('NodePublishVolume', { volume_id: 'inc-vol', staging_target_path: staging, target_path: t, volume_capability: blockCap() }), 'ALREADY_EXISTS');
    await expectCode(node('NodePublishVolume', { volume_id: 'inc-vol', staging_target_path: staging, target_path: t, volume_capability: mountCap('', 'SINGLE_NODE_READER_ONLY') }), 'ALREADY_EXISTS');
    // Another volume at a path this one holds.
    const other = await staged('inc-other');
    await expectCode(node('NodePublishVolume', { volume_id: 'inc-other', staging_target_path: other.staging, target_path: t, volume_capability: other.cap }), 'ALREADY_EXISTS');
    expect(mountAt(t)?.fsType).toBe('ext4');
    expect(lstatSync(t).isDirectory()).toBe(true);
    await node('NodeUnpublishVolume', { volume_id: 'inc-vol', target_path: t });
    await node('NodeUnstageVolume', { volume_id: 'inc-vol', staging_target_path: staging });
    await node('NodeUnstageVolume', { volume_id: 'inc-other', staging_target_path: other.staging });
    expect(await loopsLeftUnder(csi.s.root)).toEqual([]);
  });
});

describe('paging', () => {
  const paging = useCsiServer({ nodeId: 'node-p' });

  it('a tampered token is ABORTED; entries deleted between pages neither repeat nor shift the rest', async () => {
    const ids = ['pa-1', 'pa-2', 'pa-3', 'pa-4', 'pa-5', 'pa-6'];
    for (const name of ids) await paging.ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const first = await paging.ctl('ListVolumes', { max_entries: 2 });
    expect(first.entries.map((e) => e.volume.volume_id)).toEqual(['pa-1', 'pa-2']);
    const token = first.next_token;
    expect(token).not.toBe('');
    for (const forged of [`${token}=`, `${token}x`, ` ${token}`, token.toUpperCase() === token ? `${token}a` : token.toUpperCase()])
      await expectCode(paging.ctl('ListVolumes', { max_entries: 2, starting_token: forged }), 'ABORTED');
    // The last entry handed out goes away, a new one appears before the cursor: the rest follows unchanged.
    await paging.ctl('DeleteVolume', { volume_id: 'pa-2' });
    await paging.ctl('CreateVolume', { name: 'pa-0', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const seen: string[] = [];
    let next = token;
    for (let page = 0; next && page < 10; page++) {
      const r = await paging.ctl('ListVolumes', { max_entries: 2, starting_token: next });
      seen.push(...r.entries.map((e) => e.volume.volume_id));
      next = r.next_token;
    }
    expect(next).toBe('');
    expect(seen).toEqual(['pa-3', 'pa-4', 'pa-5', 'pa-6']);
  });
});

describe('paging: a truncated token', () => {
  const trunc = useCsiServer({ nodeId: 'node-t' });

  // Once a bug: a token was "ours" whenever it round-trips through base64url, so one cut short by a
  // character ("volumes\npa-2" -> "volumes\npa-") was accepted and the listing restarted before entries
  // already handed out. Tokens now carry a checksum.
  it('is ABORTED rather than silently listing entries again', async () => {
    for (const name of ['pa-1', 'pa-2', 'pa-3']) await trunc.ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const token = (await trunc.ctl('ListVolumes', { max_entries: 2 })).next_token;
    expect(token).not.toBe('');
    for (let cut = 1; cut <= 6; cut++) {
      const o = await outcome(trunc.ctl('ListVolumes', { max_entries: 2, starting_token: token.slice(0, -cut) }));
      expect(o.code, `token cut by ${cut}`).toBe('ABORTED');
    }
    const next = await trunc.ctl('ListVolumes', { max_entries: 2, starting_token: token });
    expect(next.entries.map((e) => e.volume?.volume_id)).toEqual(['pa-3']);
  });
});

describe('snapshots and clones of raw block volumes, checked by sha256', () => {
  it('restores a snapshot into a larger volume and clones a live one, byte for byte', async () => {
    const cap = blockCap();
    await ctl('CreateVolume', { name: 'rb-src', volume_capabilities: [cap], capacity_range: size(16 * MiB) });
    const src = await mountInPod(csi, 'rb-src', cap);
    expect(lstatSync(src.target).isBlockDevice()).toBe(true);
    const original = writeRandomDevice(src.target, 4 * MiB);
    await ctl('CreateSnapshot', { name: 'rb-snap', source_volume_id: 'rb-src' });
    const changed = writeRandomDevice(src.target, 4 * MiB);
    expect(changed).not.toBe(original);

    await ctl('CreateVolume', { name: 'rb-restored', volume_capabilities: [cap], capacity_range: size(32 * MiB), volume_content_source: { snapshot: { snapshot_id: 'rb-snap' } } });
    await ctl('CreateVolume', { name: 'rb-clone', volume_capabilities: [cap], capacity_range: size(16 * MiB), volume_content_source: { volume: { volume_id: 'rb-src' } } });
    const r = await mountInPod(csi, 'rb-restored', cap);
    const c = await mountInPod(csi, 'rb-clone', cap);
    expect(deviceSha256(r.target, 4 * MiB)).toBe(original);
    expect(deviceSha256(c.target, 4 * MiB)).toBe(changed);
    expect(Number(execFileSync('blockdev', ['--getsize64', r.target], { encoding: 'utf8' }).trim())).toBe(32 * MiB);
    for (const m of [src, r, c]) await m.release();
    expect(await loopsLeftUnder(csi.s.root)).toEqual([]);
  });
});

describe('the 10 GiB default size through a whole lifecycle', () => {
  it('formats, mounts and carries data, and the image stays sparse', async () => {
    const cap = mountCap();
    const created = await ctl('CreateVolume', { name: 'ten-gib', volume_capabilities: [cap] });
    expect(created.volume.capacity_bytes).toBe(String(10 * GiB));
    const m = await mountInPod(csi, 'ten-gib', cap);
    expect(fsTotalBytes(m.target)).toBeGreaterThan(9 * GiB);
    const digest = writeRandomFile(join(m.target, 'payload.bin'));
    expect(fileSha256(join(m.target, 'payload.bin'))).toBe(digest);
    await m.release();
    const image = statSync(join(csi.s.dataRoot, 'volumes/ten-gib/image.img'));
    expect(image.size).toBe(10 * GiB);
    expect(image.blocks * 512).toBeLessThan(GiB);
    await ctl('DeleteVolume', { volume_id: 'ten-gib' });
  });
});

describe('one operation per volume at a time, on the node too', () => {
  it('answers ABORTED to every change on a volume while a NodeStageVolume on it runs, and nothing interleaves', async () => {
    const { staging, target, cap } = await ready('cc-vol');
    const other = await ready('cc-other');
    const core = openCore(loadConfig(csi.s.env));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    // Holding the volume's node lock from outside keeps the first call in flight for certain.
    const holder = core.nodeState.lockVolume('cc-vol', async () => {
      locked();
      await held;
    });
    let first: Promise<CallOutcome> | undefined;
    try {
      await isLocked;
      first = outcome(node('NodeStageVolume', { volume_id: 'cc-vol', staging_target_path: staging, volume_capability: cap }));
      // Until the stage has registered, this no-op expand answers OK; from then on, ABORTED.
      let probe: CallOutcome = { code: 'OK', message: '' };
      for (let i = 0; i < 200 && probe.code === 'OK'; i++) probe = await outcome(ctl('ControllerExpandVolume', { volume_id: 'cc-vol', capacity_range: size(MiB) }));
      expect(probe.code).toBe('ABORTED');

      const t = target('pod-cc');
      const rivals: [string, () => Promise<unknown>][] = [
        ['NodeStageVolume', () => node('NodeStageVolume', { volume_id: 'cc-vol', staging_target_path: staging, volume_capability: cap })],
        ['NodeUnstageVolume', () => node('NodeUnstageVolume', { volume_id: 'cc-vol', staging_target_path: staging })],
        ['NodePublishVolume', () => node('NodePublishVolume', { volume_id: 'cc-vol', staging_target_path: staging, target_path: t, volume_capability: cap })],
        ['NodeUnpublishVolume', () => node('NodeUnpublishVolume', { volume_id: 'cc-vol', target_path: t })],
        ['NodeExpandVolume', () => node('NodeExpandVolume', { volume_id: 'cc-vol', volume_path: staging })],
        ['ControllerUnpublishVolume', () => ctl('ControllerUnpublishVolume', { volume_id: 'cc-vol', node_id: 'node-a' })],
        ['ControllerPublishVolume', () => ctl('ControllerPublishVolume', { volume_id: 'cc-vol', node_id: 'node-a', volume_capability: cap })],
        ['DeleteVolume', () => ctl('DeleteVolume', { volume_id: 'cc-vol' })],
        ['CreateVolume', () => ctl('CreateVolume', { name: 'cc-vol', volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(64 * MiB) })],
      ];
      const answers = await Promise.all(rivals.map(async ([m, call]) => `${m}: ${(await outcome(call())).code}`));
      expect(answers).toEqual(rivals.map(([m]) => `${m}: ABORTED`));
      // Another volume is not held up by this one.
      await node('NodeStageVolume', { volume_id: 'cc-other', staging_target_path: other.staging, volume_capability: other.cap });
      expect(mountAt(other.staging)).toBeDefined();
      expect(mountAt(staging)).toBeUndefined();
      expect(existsSync(t)).toBe(false);
    } finally {
      release();
      await holder;
    }
    expect((await first)?.code).toBe('OK');
    expect(mountsBelow(staging)).toEqual([staging]);
    // The refused calls did nothing: still attached, still there, still staged once.
    expect((await ctl('ControllerGetVolume', { volume_id: 'cc-vol' })).status.published_node_ids).toEqual(['node-a']);
    const { entries } = await logLinesWhen((es) => es.some((e) => e.method === 'NodeStageVolume' && e.volumeId === 'cc-vol' && e.code === 'OK'));
    const mine = entries.filter((e) => e.volumeId === 'cc-vol' && e.code !== undefined);
    const stageOk = mine.findIndex((e) => e.method === 'NodeStageVolume' && e.code === 'OK');
    // Every ABORTED answer was given while the stage was still running, i.e. before its own line.
    expect(mine.slice(stageOk + 1).filter((e) => e.code === 'ABORTED')).toEqual([]);
    expect(mine.filter((e) => e.code === 'ABORTED').length).toBeGreaterThanOrEqual(10);
    await node('NodeUnstageVolume', { volume_id: 'cc-vol', staging_target_path: staging });
    await node('NodeUnstageVolume', { volume_id: 'cc-other', staging_target_path: other.staging });
  });

  it('the same publish sent many times at once mounts the target once', async () => {
    const { staging, target, cap } = await staged('cc-pub');
    const t = target('pod-cc-pub');
    const req = { volume_id: 'cc-pub', staging_target_path: staging, target_path: t, volume_capability: cap };
    const codes = await Promise.all(Array.from({ length: 8 }, async () => (await outcome(node('NodePublishVolume', req))).code));
    expect(codes).toContain('OK');
    expect(codes.filter((c) => c !== 'OK' && c !== 'ABORTED')).toEqual([]);
    await repeatedOk('NodePublishVolume after the burst', () => node('NodePublishVolume', req));
    expect(mountsBelow(dirname(t))).toEqual([t]);
    await node('NodeUnpublishVolume', { volume_id: 'cc-pub', target_path: t });
    await node('NodeUnstageVolume', { volume_id: 'cc-pub', staging_target_path: staging });
  });
});

/**
 * A FUSE mount whose daemon is gone: the /dev/fuse descriptor is handed to mount(2) and closed when
 * the shell exits, so the kernel aborts the connection and every access fails with ENOTCONN, the
 * error kubelet's mount-utils calls a corrupted mount.
 */
function mountStale(path: string): void {
  execFileSync('sh', ['-c', 'exec 3<>/dev/fuse && exec mount -i -t fuse -o fd=3,rootmode=40000,user_id=0,group_id=0 twinvol-stale "$1"', 'sh', path]);
  let code: string | undefined;
  try {
    statSync(path);
  } catch (err) {
    code = (err as NodeJS.ErrnoException).code;
  }
  expect(code, `${path} should be a stale mount`).toBe('ENOTCONN');
}

describe('stale mounts (ENOTCONN) are force-unmounted, not errors', () => {
  it('NodeUnpublishVolume of a target whose mount went stale: OK, nothing left, target removed', async () => {
    const { staging, target, cap } = await staged('stale-pub');
    const t = target('pod-stale');
    await node('NodePublishVolume', { volume_id: 'stale-pub', staging_target_path: staging, target_path: t, volume_capability: cap });
    mountStale(t);
    await repeatedOk('NodeUnpublishVolume of a stale target', () => node('NodeUnpublishVolume', { volume_id: 'stale-pub', target_path: t }));
    expect(mountsBelow(dirname(t))).toEqual([]);
    expect(existsSync(t)).toBe(false);
    await node('NodeUnstageVolume', { volume_id: 'stale-pub', staging_target_path: staging });
  });

  it('NodeUnstageVolume of a staging path whose mount went stale: OK, nothing left, device released', async () => {
    const { staging } = await staged('stale-stage', { backend: 'block', bytes: 16 * MiB });
    mountStale(staging);
    await repeatedOk('NodeUnstageVolume of a stale staging path', () => node('NodeUnstageVolume', { volume_id: 'stale-stage', staging_target_path: staging }));
    expect(mountsBelow(staging)).toEqual([]);
    expect(await loopsLeftUnder(join(csi.s.dataRoot, 'volumes/stale-stage'))).toEqual([]);
  });

  it('a stale mount left at a path twinvol has no record of (a plugin restart) unmounts OK too', async () => {
    const t = targetPath(csi.s.kubeletDir, 'pod-orphan', 'orphan');
    const s = stagingPath(csi.s.kubeletDir, 'orphan');
    for (const p of [t, s]) {
      mkdirSync(p, { recursive: true });
      mountStale(p);
    }
    await repeatedOk('NodeUnpublishVolume of an unrecorded stale target', () => node('NodeUnpublishVolume', { volume_id: 'orphan', target_path: t }));
    await repeatedOk('NodeUnstageVolume of an unrecorded stale staging path', () => node('NodeUnstageVolume', { volume_id: 'orphan', staging_target_path: s }));
    expect(mountsBelow(t)).toEqual([]);
    expect(mountsBelow(s)).toEqual([]);
    expect(existsSync(t)).toBe(false);
  });

  // Once a bug: statfs on the stale target threw ENOTCONN, which reached the CO as INTERNAL.
  it('NodeGetVolumeStats on a stale target reports an abnormal condition rather than failing', async () => {
    const { staging, target, cap } = await staged('stale-stats');
    const t = target('pod-stale-stats');
    await node('NodePublishVolume', { volume_id: 'stale-stats', staging_target_path: staging, target_path: t, volume_capability: cap });
    mountStale(t);
    try {
      const o = await outcome(node('NodeGetVolumeStats', { volume_id: 'stale-stats', volume_path: t }));
      expect(o.code, o.message).toBe('OK');
      expect((await node('NodeGetVolumeStats', { volume_id: 'stale-stats', volume_path: t })).volume_condition.abnormal).toBe(true);
    } finally {
      await node('NodeUnpublishVolume', { volume_id: 'stale-stats', target_path: t });
      await node('NodeUnstageVolume', { volume_id: 'stale-stats', staging_target_path: staging });
    }
  });

  // Once a bug: a repeated publish saw a record and *a* mount at the target and answered OK without
  // looking, so the pod kept a target that failed every access with ENOTCONN.
  it('a repeated NodePublishVolume on a target whose mount went stale leaves a working mount', async () => {
    const { staging, target, cap } = await staged('stale-repub');
    const t = target('pod-stale-repub');
    const req = { volume_id: 'stale-repub', staging_target_path: staging, target_path: t, volume_capability: cap };
    await node('NodePublishVolume', req);
    writeFileSync(join(t, 'seen.txt'), 'data');
    mountStale(t);
    try {
      const o = await outcome(node('NodePublishVolume', req));
      expect(o.code, o.message).toBe('OK');
      expect(readdirSync(t)).toEqual(['seen.txt']);
    } finally {
      await node('NodeUnpublishVolume', { volume_id: 'stale-repub', target_path: t });
      await node('NodeUnstageVolume', { volume_id: 'stale-repub', staging_target_path: staging });
    }
  });

  // Once a bug: the same blind spot one step earlier, in stage.
  it('a repeated NodeStageVolume on a staging path whose mount went stale leaves a working mount', async () => {
    const { staging, cap } = await staged('stale-restage');
    writeFileSync(join(staging, 'seen.txt'), 'data');
    mountStale(staging);
    try {
      const o = await outcome(node('NodeStageVolume', { volume_id: 'stale-restage', staging_target_path: staging, volume_capability: cap }));
      expect(o.code, o.message).toBe('OK');
      expect(readdirSync(staging)).toEqual(['seen.txt']);
    } finally {
      await node('NodeUnstageVolume', { volume_id: 'stale-restage', staging_target_path: staging });
    }
  });
});
