// A rolling upgrade of a CSI server fronting third-party FlexVolume drivers (--backends exec,
// docs/exec-backend.md): what one release staged and published through a driver, the other repeats
// and tears down. test/exec/drivers/loop.sh as "loop" mounts its device itself; as "loopbare" it
// leaves formatting, mounting and binding to the server, as to kubelet.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { createCsiScratch, type CsiScratch } from '../csi/helpers/scratch.js';
import { installDrivers, killLoggedPids } from '../exec/helpers.js';
import { loopsLeftUnder, mountsUnder } from '../helpers/scratch.js';
import { csiServers, PAIRS, SKIP_WHY, suiteTitle, useReleases } from './releases.js';

let s: CsiScratch;
const pluginDir = () => join(s.root, 'plugins');
const servers = csiServers(() => s, () => ['--flex-plugin-dir', pluginDir()]);
beforeEach(() => {
  s = createCsiScratch('node-a');
  installDrivers(pluginDir());
});
afterEach(async () => {
  await servers.stop();
  killLoggedPids(pluginDir());
  s.cleanup();
});

const release = useReleases();

describe.skipIf(SKIP_WHY)(suiteTitle('CSI exec volumes across a rolling upgrade'), () => {
  for (const [fromName, toName] of PAIRS) {
    it(`${fromName} stages and publishes through drivers, ${toName} repeats and tears down`, async () => {
      const [from, to] = [release(fromName), release(toName)];
      const first = (await servers.serve(from)).client;
      const volumes = [];
      for (const driver of ['loop', 'loopbare']) {
        const id = `exec-${driver}`;
        const image = join(s.root, `${id}.img`);
        writeFileSync(image, '');
        truncateSync(image, 32 * MiB);
        // Formatted already: releases before the exec backend formatted a blank device (as kubelet's
        // FormatAndMount does) failed to stage one, whichever release tore it down.
        execFileSync('mkfs.ext4', ['-q', '-F', image]);
        const cap = mountCap('ext4');
        const created = await first.call('Controller', 'CreateVolume', { name: id, parameters: { backend: 'exec', driver: `acme/${driver}`, fsType: 'ext4', image }, volume_capabilities: [cap], capacity_range: size(32 * MiB) });
        const ctx = created.volume.volume_context;
        const pub = await first.call('Controller', 'ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap, volume_context: ctx });
        const staging = stagingPath(s.kubeletDir, id);
        const target = targetPath(s.kubeletDir, `pod-${id}`, id);
        mkdirSync(staging, { recursive: true });
        mkdirSync(dirname(target), { recursive: true });
        const stage = { volume_id: id, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: cap, volume_context: ctx };
        const publish = { volume_id: id, staging_target_path: staging, target_path: target, publish_context: pub.publish_context, volume_capability: cap, volume_context: ctx };
        await first.call('Node', 'NodeStageVolume', stage);
        await first.call('Node', 'NodePublishVolume', publish);
        writeFileSync(join(target, 'written'), fromName);
        volumes.push({ id, stage, publish, staging, target });
      }
      const second = (await servers.serve(to)).client;
      for (const v of volumes) {
        await second.call('Node', 'NodeStageVolume', v.stage);
        await second.call('Node', 'NodePublishVolume', v.publish);
        expect(readFileSync(join(v.target, 'written'), 'utf8')).toBe(fromName);
        await second.call('Node', 'NodeUnpublishVolume', { volume_id: v.id, target_path: v.target });
        await second.call('Node', 'NodeUnstageVolume', { volume_id: v.id, staging_target_path: v.staging });
        await second.call('Controller', 'ControllerUnpublishVolume', { volume_id: v.id, node_id: 'node-a' });
        await second.call('Controller', 'DeleteVolume', { volume_id: v.id });
      }
      expect(mountsUnder(s.kubeletDir)).toEqual([]);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
    });
  }
});
