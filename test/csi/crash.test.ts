import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../shared/store/catalog.js';
import { useKillableServers } from '../helpers/killable-servers.js';
import { killStalled, stallingTool, untilStalled } from '../helpers/stalling-tool.js';
import { realTool, wrappedTool } from '../helpers/tool-wrapper.js';
import { outcome } from './helpers/client.js';
import { MiB, mountCap, size, stagingPath } from './helpers/requests.js';
import type { CsiScratch } from './helpers/scratch.js';
import type { RunningCsi } from './helpers/server.js';
import { shQuote } from '../../flex/shell-quote.js';

let s: CsiScratch;
const crash = useKillableServers((scratch) => {
  s = scratch;
});
// Registered after the helper's, so run before its cleanup (vitest runs afterEach hooks last first):
// a filesystem left frozen by a failed test would outlive its unmount and keep its loop device bound.
afterEach(() => {
  for (const line of readFileSync('/proc/self/mounts', 'utf8').split('\n'))
    if (line.split(' ')[1]?.startsWith(`${s.root}/`)) spawnSync('fsfreeze', ['--unfreeze', line.split(' ')[1] ?? '']);
});

const launch = (env?: NodeJS.ProcessEnv): Promise<RunningCsi> => crash.launch(env);
const workLeft = () => (existsSync(join(s.dataRoot, '.work')) ? readdirSync(join(s.dataRoot, '.work')).sort() : []);
const cap = mountCap('ext4');

/** Starts `call` on a server whose `cp` stalls, and kills the server (kill -9) once the copy is under way. */
const killedWhileCopying = (call: (server: RunningCsi) => Promise<unknown>) => crash.killedAt(crash.track(stallingTool(s.root, 'cp', '--reflink=auto')), call);

describe('a CSI server killed while it copies data', () => {
  it('leaves partial copies that the next server sweeps at start-up, and the retried calls succeed', async () => {
    const first = await launch();
    await first.client.call('Controller', 'CreateVolume', { name: 'src', volume_capabilities: [cap], capacity_range: size(32 * MiB) });
    await first.client.call('Controller', 'CreateSnapshot', { name: 'snap-1', source_volume_id: 'src' });
    await first.stop();

    await killedWhileCopying((server) => server.client.call('Controller', 'CreateSnapshot', { name: 'snap-2', source_volume_id: 'src' }));
    // What the crash left: a partial copy, and nothing in the catalog.
    expect(workLeft()).toEqual([expect.stringMatching(/^new@snapshots@snap-2@/)]);
    const restore = { name: 'restored', volume_capabilities: [cap], capacity_range: size(32 * MiB), volume_content_source: { snapshot: { snapshot_id: 'snap-1' } } };
    await killedWhileCopying((server) => server.client.call('Controller', 'CreateVolume', restore));
    // The server started for this second crash sweeps snap-2's copy at its start when the killed
    // holder's lock is a second old by then (a loaded machine): it may be gone already.
    const left = workLeft();
    expect(left.filter((w) => !/^new@snapshots@snap-2@/.test(w))).toEqual([expect.stringMatching(/^new@volumes@restored@/)]);

    // The killed holders' locks are taken over once they are a second old (shared/store/lock.ts).
    const catalog = new Catalog(s.dataRoot);
    await catalog.lock('snapshot', 'snap-2', async () => {}, { waitMs: 30_000 });
    await catalog.lock('volume', 'restored', async () => {}, { waitMs: 30_000 });

    const next = await launch();
    const log = await next.logWhen((entries) => entries.some((e) => e.msg === 'swept abandoned work'));
    expect(log.entries.find((e) => e.msg === 'swept abandoned work')).toMatchObject({ removed: left, busy: [], foreign: [] });
    expect(workLeft()).toEqual([]);

    await next.client.call('Controller', 'CreateSnapshot', { name: 'snap-2', source_volume_id: 'src' });
    await next.client.call('Controller', 'CreateVolume', restore);
    expect(workLeft()).toEqual([]);
  });
});

describe('a CSI server killed while a group snapshot holds a filesystem frozen', () => {
  it('leaves a marker, and the next server thaws the filesystem at start-up', async () => {
    const first = await launch();
    const call = first.client.call.bind(first.client);
    await call('Controller', 'CreateVolume', { name: 'frozen-vol', volume_capabilities: [cap], capacity_range: size(32 * MiB) });
    const pod = { volume_id: 'frozen-vol', node_id: 'node-a', volume_capability: cap };
    const staging = stagingPath(s.kubeletDir, 'frozen-vol');
    mkdirSync(staging, { recursive: true });
    await call('Controller', 'ControllerPublishVolume', pod);
    await call('Node', 'NodeStageVolume', { volume_id: 'frozen-vol', staging_target_path: staging, volume_capability: cap });
    await first.stop();

    // The freeze itself is real; the wrapper then stops, and the server is killed before any thaw.
    const real = realTool('fsfreeze');
    const marker = join(s.root, 'frozen-by');
    const freeze = wrappedTool(s.root, 'fsfreeze', `if [ "$1" = --freeze ]; then ${shQuote(real)} "$@"; echo $$ > ${shQuote(marker)}; exec sleep 60; fi`);
    const server = await launch({ PATH: `${freeze.dir}:/usr/sbin:/usr/bin:/sbin:/bin` });
    const reply = outcome(server.client.call('GroupController', 'CreateVolumeGroupSnapshot', { name: 'g', source_volume_ids: ['frozen-vol'] }));
    const stall = { dir: freeze.dir, marker };
    try {
      await untilStalled(stall, 'the freeze');
      // Frozen for real: a second freeze is refused as busy (a write would hang the test instead).
      expect(spawnSync(real, ['--freeze', staging], { encoding: 'utf8' }).stderr).toMatch(/busy/i);
    } finally {
      server.child.kill('SIGKILL');
      killStalled(stall);
    }
    expect((await reply).code).not.toBe('OK');
    await server.stop();

    const next = await launch();
    const log = await next.logWhen((entries) => entries.some((e) => e.msg === 'thawed filesystems a killed group snapshot left frozen'));
    expect(log.entries.find((e) => e.msg === 'thawed filesystems a killed group snapshot left frozen')).toMatchObject({ thawed: [staging] });
    expect(spawnSync('sh', ['-c', `echo after > ${shQuote(join(staging, 'after.txt'))} && sync -f ${shQuote(staging)}`], { timeout: 10_000 }).status).toBe(0);
    await next.client.call('Node', 'NodeUnstageVolume', { volume_id: 'frozen-vol', staging_target_path: staging });
    await next.client.call('Controller', 'ControllerUnpublishVolume', pod);
  });
});
