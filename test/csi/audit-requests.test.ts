import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { expectCode, outcome, serviceCall } from './helpers/client.js';
import { fileSha256, writeRandomFile } from './helpers/data.js';
import { useCsiServer } from './helpers/fixture.js';
import { csiFlavours, runsOn } from './helpers/flavour.js';
import { type ReadyOptions, stagedVolume } from './helpers/pod-mount.js';
import { blockCap, MiB, mountCap, size, stagingPath, targetPath } from './helpers/requests.js';
import { mountsBelow } from './helpers/scratch.js';
import { treeOf } from './helpers/tree.js';

/**
 * The CSI v1.12 spec's rules (csi/README.md), item by item, where the other suites leave a rule
 * untested or test it only in part: required fields, bad ids and paths, size limits of strings and
 * maps, secrets in logs. Every server here is the real bundle on a scratch world; the fixture stops it
 * and unmounts, detaches and deletes everything in afterAll, whether the tests passed or not.
 */
// Against the built-in server and the exec one (test/csi/helpers/flavour.ts): the exec one runs the
// cases marked fast by default, and all that apply to it under TWINVOL_LONG=1.
describe.for(csiFlavours())('requests ($name)', (flavour) => {
  const csi = useCsiServer({ nodeId: 'node-a', flavour });
  const { ctl, node } = csi;
  const group = serviceCall(() => csi.client, 'GroupController');

  const staged = (id: string, opts?: ReadyOptions) => stagedVolume(csi, id, opts);

  const logLinesWhen = (want: Parameters<typeof csi.server.logWhen>[0]) => csi.server.logWhen(want);
  // The CreateVolume parameters of a small volume of this flavour (built-in: dir).
  const params = flavour.parameters();
  const offers = (need: Parameters<typeof flavour.offers.includes>[0]) => flavour.offers.includes(need);

  describe('required fields: each one missing is INVALID_ARGUMENT naming it, and changes nothing', () => {
    it.runIf(runsOn(flavour, { exec: 'fast' }))('every RPC with a required field', async () => {
      const { staging, target, cap } = await staged('rf-vol');
      const t = target('pod-rf');
      await node('NodePublishVolume', { volume_id: 'rf-vol', staging_target_path: staging, target_path: t, volume_capability: cap });
      if (offers('snapshots')) await ctl('CreateSnapshot', { name: 'rf-snap', source_volume_id: 'rf-vol' });
      const before = treeOf(csi.s.root);
      const mountsBefore = mountsBelow(csi.s.root);

      // Each request is complete except for the one field named; complete, each would succeed.
      const cases: [string, string, () => Promise<unknown>][] = [
        ['CreateVolume', 'name', () => ctl('CreateVolume', { volume_capabilities: [cap], parameters: params, capacity_range: size(MiB) })],
        ['CreateVolume', 'volume_capabilities', () => ctl('CreateVolume', { name: 'rf-new', parameters: params, capacity_range: size(MiB) })],
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
        // A server without group snapshots serves no group controller (UNIMPLEMENTED: audit-identity).
        ...(offers('group-snapshots')
          ? ([
              ['CreateVolumeGroupSnapshot', 'name', () => group('CreateVolumeGroupSnapshot', { source_volume_ids: ['rf-vol'] })],
              ['CreateVolumeGroupSnapshot', 'source_volume_ids', () => group('CreateVolumeGroupSnapshot', { name: 'rf-group' })],
              ['GetVolumeGroupSnapshot', 'group_snapshot_id', () => group('GetVolumeGroupSnapshot', {})],
              ['DeleteVolumeGroupSnapshot', 'group_snapshot_id', () => group('DeleteVolumeGroupSnapshot', {})],
            ] as [string, string, () => Promise<unknown>][])
          : []),
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
      if (offers('volume-stats')) await node('NodeGetVolumeStats', { volume_id: 'rf-vol', volume_path: t });
      await node('NodeUnpublishVolume', { volume_id: 'rf-vol', target_path: t });
      await node('NodeUnstageVolume', { volume_id: 'rf-vol', staging_target_path: staging });
    });
  });

  describe('bad ids and names, paths outside the kubelet dir: INVALID_ARGUMENT and nothing touched', () => {
    const BAD_IDS = ['..', '../data', 'a/b', '/abs', 'nul\0byte', 'x'.repeat(129)];

    it.runIf(runsOn(flavour))('refuses a bad volume, snapshot or node id in every RPC that takes one', async () => {
      const { staging, target, cap } = await staged('bad-id-vol');
      const t = target('pod-bad');
      await node('NodePublishVolume', { volume_id: 'bad-id-vol', staging_target_path: staging, target_path: t, volume_capability: cap });
      const before = treeOf(csi.s.root);
      const mountsBefore = mountsBelow(csi.s.root);
      const wrong: string[] = [];
      for (const bad of BAD_IDS) {
        const calls: [string, () => Promise<unknown>][] = [
          ['CreateVolume source volume', () => ctl('CreateVolume', { name: 'bad-src', volume_capabilities: [cap], parameters: params, capacity_range: size(MiB), volume_content_source: { volume: { volume_id: bad } } })],
          ['CreateVolume source snapshot', () => ctl('CreateVolume', { name: 'bad-src', volume_capabilities: [cap], parameters: params, capacity_range: size(MiB), volume_content_source: { snapshot: { snapshot_id: bad } } })],
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
          calls.push(['CreateVolume name', () => ctl('CreateVolume', { name: bad, volume_capabilities: [cap], parameters: params, capacity_range: size(MiB) })]);
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

    it.runIf(runsOn(flavour))('refuses a node id longer than 253 bytes', async () => {
      await ctl('CreateVolume', { name: 'long-node', volume_capabilities: [mountCap()], parameters: params, capacity_range: size(MiB) });
      await expectCode(ctl('ControllerPublishVolume', { volume_id: 'long-node', node_id: 'n'.repeat(254), volume_capability: mountCap() }), 'INVALID_ARGUMENT');
      expect((await ctl('ControllerGetVolume', { volume_id: 'long-node' })).status.published_node_ids).toEqual([]);
    });

    it.runIf(runsOn(flavour))('never unmounts or removes a path outside the kubelet dir, however it is named', async () => {
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

    // It reads the data back from the dir volume's tree.
    it.runIf(runsOn(flavour, { needs: ['dir-data'] }))('a 128-byte volume id goes through the whole lifecycle with 4 KiB secrets and contexts', async () => {
      const id = `v${'1'.repeat(127)}`;
      const cap = mountCap();
      const secrets = map4k('k');
      await ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: params, capacity_range: size(MiB), secrets });
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

    it.runIf(runsOn(flavour, { needs: ['snapshots'] }))('a 128-byte snapshot name and node id, 4 KiB snapshot parameters and secrets', async () => {
      await ctl('CreateVolume', { name: 'long-src', volume_capabilities: [mountCap()], parameters: params, capacity_range: size(MiB) });
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

    it.runIf(runsOn(flavour))('refuses past the documented limits (REQUEST_LIMITS, shared/validate.ts), naming the field, and changes nothing', async () => {
      const { staging, target, cap } = await staged('bounded');
      const t = target('pod-bounded');
      const before = treeOf(csi.s.root);
      const publish = (extra: object) => node('NodePublishVolume', { volume_id: 'bounded', staging_target_path: staging, target_path: t, volume_capability: cap, ...extra });
      const manyKeys = Object.fromEntries(Array.from({ length: 257 }, (_, i) => [`k${i}`, 'v']));
      expect(await expectCode(publish({ volume_context: { big: 'x'.repeat(65 * 1024) } }), 'INVALID_ARGUMENT')).toBe('volume_context.big is longer than 65536 bytes');
      expect(await expectCode(publish({ volume_context: { a: 'x'.repeat(40_000), b: 'y'.repeat(40_000) } }), 'INVALID_ARGUMENT')).toBe('volume_context is larger than 65536 bytes');
      expect(await expectCode(publish({ secrets: manyKeys }), 'INVALID_ARGUMENT')).toBe('secrets has more than 256 entries');
      // Past the transport's own limit, grpc-js refuses before twinvol reads a byte.
      await expectCode(publish({ volume_context: { huge: 'z'.repeat(3 * 1024 * 1024) } }), 'RESOURCE_EXHAUSTED');
      expect(treeOf(csi.s.root)).toEqual(before);
      expect(mountAt(t)).toBeUndefined();
      await node('NodeUnstageVolume', { volume_id: 'bounded', staging_target_path: staging });
    });
  });

  describe('secrets never reach the log', () => {
    // Key names a redaction list would not guess, so only "never logged at all" passes. Their common
    // fragment has letters beyond hex: "7f3a" once turned up inside a random request id.
    const KEY = 'acmeKeyQz7x';
    const VALUE = 'v4lue-qz7x-MUST-NOT-LEAK';
    const secrets = { [KEY]: VALUE, 'other-k-9c1e': 'other-v-9c1e' };

    it.runIf(runsOn(flavour, { exec: 'fast' }))('in CreateVolume, ControllerPublishVolume, NodeStageVolume and NodePublishVolume, answered OK or not', async () => {
      const cap = mountCap();
      await ctl('CreateVolume', { name: 'sec-vol', volume_capabilities: [cap], parameters: params, capacity_range: size(MiB), secrets });
      await expectCode(ctl('CreateVolume', { name: 'sec-vol', volume_capabilities: [cap], parameters: params, capacity_range: size(2 * MiB), secrets }), 'ALREADY_EXISTS');
      await ctl('ControllerPublishVolume', { volume_id: 'sec-vol', node_id: 'node-a', volume_capability: cap, secrets });
      await csi.registerNodes('node-b');
      await expectCode(ctl('ControllerPublishVolume', { volume_id: 'sec-vol', node_id: 'node-b', volume_capability: cap, secrets }), 'FAILED_PRECONDITION');
      const staging = stagingPath(csi.s.kubeletDir, 'sec-vol');
      mkdirSync(staging, { recursive: true });
      // Refused for a context that contradicts the catalog; an exec volume's context is its driver's, so
      // there the refusal is FlexVolume's lack of raw block: either way nothing of the call may be logged.
      const refusedCap = flavour.name === 'exec' ? blockCap() : cap;
      await expectCode(node('NodeStageVolume', { volume_id: 'sec-vol', staging_target_path: staging, volume_capability: refusedCap, secrets, volume_context: { source: VALUE } }), 'INVALID_ARGUMENT');
      await node('NodeStageVolume', { volume_id: 'sec-vol', staging_target_path: staging, volume_capability: cap, secrets });
      const t = targetPath(csi.s.kubeletDir, 'pod-sec', 'sec-vol');
      await expectCode(node('NodePublishVolume', { volume_id: 'sec-vol', target_path: t, volume_capability: cap, secrets }), 'FAILED_PRECONDITION');
      await node('NodePublishVolume', { volume_id: 'sec-vol', staging_target_path: staging, target_path: t, volume_capability: cap, secrets });
      await node('NodeUnpublishVolume', { volume_id: 'sec-vol', target_path: t });
      await node('NodeUnstageVolume', { volume_id: 'sec-vol', staging_target_path: staging });
      await ctl('ControllerUnpublishVolume', { volume_id: 'sec-vol', node_id: 'node-a' });

      const methods = ['CreateVolume', 'ControllerPublishVolume', 'NodeStageVolume', 'NodePublishVolume'];
      // Only a call's own line carries a code: lines logged within a call (a driver's) carry its method and volume too.
      const { text, entries } = await logLinesWhen((es) => methods.every((m) => es.filter((e) => e.method === m && e.volumeId === 'sec-vol' && e.code !== undefined).length >= 2));
      // The calls were logged (so the check below looks at them), OK and refused ones alike...
      for (const m of methods) {
        const codes = entries.filter((e) => e.method === m && e.volumeId === 'sec-vol' && e.code !== undefined).map((e) => e.code);
        expect(codes, m).toContain('OK');
        expect(codes.filter((c) => c !== 'OK'), m).toHaveLength(1);
      }
      // ...and no line holds a secret's key or value.
      for (const s of [KEY, VALUE, 'other-k-9c1e', 'other-v-9c1e']) expect(text).not.toContain(s);
      expect(text.toLowerCase()).not.toContain('qz7x');
    });
  });
});
