// A CSI server killed inside NodeStageVolume between the mount of a volume whose filesystem is smaller
// than its image (restored larger than its snapshot) and the growth that follows the mount (xfs grows
// mounted: shared/backends/block.ts stage). The retry found the staging mounted and answered OK, and
// the filesystem kept the snapshot's size: kubelet sends no NodeExpandVolume for a restore.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Catalog } from '../../shared/store/catalog.js';
import { outcome } from '../csi/helpers/client.js';
import { MiB, mountCap, size, stagingPath } from '../csi/helpers/requests.js';
import type { CsiScratch } from '../csi/helpers/scratch.js';
import type { RunningCsi } from '../csi/helpers/server.js';
import { useKillableServers } from '../helpers/killable-servers.js';
import { stallingTool } from '../helpers/stalling-tool.js';

let s: CsiScratch;
const crash = useKillableServers((scratch) => {
  s = scratch;
});

const launch = (env?: NodeJS.ProcessEnv): Promise<RunningCsi> => crash.launch(env);

/** The size of the filesystem mounted at `path`, in bytes, as df reports it. */
const filesystemSize = (path: string) => Number(execFileSync('df', ['-B1', '--output=size', path], { encoding: 'utf8' }).split('\n')[1]);

describe('a CSI server killed in NodeStageVolume between the mount and the growth of a restored xfs volume', () => {
  it('the retried NodeStageVolume grows the filesystem to the volume\'s size before it answers', async () => {
    const cap = mountCap('xfs');
    const first = await launch();
    // xfs needs 300 MiB; the images are sparse.
    await first.client.call('Controller', 'CreateVolume', { name: 'src', volume_capabilities: [cap], capacity_range: size(300 * MiB) });
    await first.client.call('Controller', 'CreateSnapshot', { name: 'snap', source_volume_id: 'src' });
    const restore = { name: 'big', volume_capabilities: [cap], capacity_range: size(600 * MiB), volume_content_source: { snapshot: { snapshot_id: 'snap' } } };
    await first.client.call('Controller', 'CreateVolume', restore);
    const pod = { volume_id: 'big', node_id: 'node-a', volume_capability: cap };
    await first.client.call('Controller', 'ControllerPublishVolume', pod);
    await first.stop();

    const staging = stagingPath(s.kubeletDir, 'big');
    mkdirSync(staging, { recursive: true });
    const stage = { volume_id: 'big', staging_target_path: staging, volume_capability: cap };
    await crash.killedAt(crash.track(stallingTool(s.root, 'xfs_growfs', staging)), (killed) => killed.client.call('Node', 'NodeStageVolume', stage));
    // What the kill left: mounted, the snapshot's size.
    expect(filesystemSize(staging)).toBeLessThan(300 * MiB);

    const next = await launch();
    await next.client.call('Node', 'NodeStageVolume', stage);
    expect(filesystemSize(staging)).toBeGreaterThan(500 * MiB);
    expect((await new Catalog(s.dataRoot).requireVolume('big')).fsResizePending).toBeUndefined();
    await next.client.call('Node', 'NodeUnstageVolume', stage);
    await next.client.call('Controller', 'ControllerUnpublishVolume', pod);
    expect((await outcome(next.client.call('Controller', 'DeleteVolume', { volume_id: 'big' }))).code).toBe('OK');
  });
});
