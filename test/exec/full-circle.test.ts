import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readMounts } from '../../shared/mountinfo.js';
import { useCsiServer } from '../csi/helpers/fixture.js';
import { EXEC_CIRCLE } from '../csi/helpers/flavour.js';
import { mountCap, stagingPath, targetPath } from '../csi/helpers/requests.js';

/**
 * The full circle: twinvol's own FlexVolume executable (dist/flex/twinvol) as the third-party driver
 * of twinvol's CSI server, fronted alone (--backends exec), set up by the exec flavour of the CSI
 * conformance suites (test/csi/helpers/flavour.ts), which run against it too (test/csi/audit-*.test.ts).
 * Here: one whole life, data in place; the fixture fails the file if a driver process is left.
 */
const csi = useCsiServer({ flavour: EXEC_CIRCLE });
const mountsAt = (path: string) => readMounts().filter((m) => m.mountPoint === path).length;

describe('exec backend: twinvol\'s FlexVolume executable behind twinvol\'s CSI server', () => {
  it('advertises what its init reports and runs a whole life, data in place', async () => {
    const caps = (await csi.ctl('ControllerGetCapabilities', {})).capabilities.map((c) => c.rpc.type).sort();
    expect(caps).toEqual(['CREATE_DELETE_VOLUME', 'EXPAND_VOLUME', 'PUBLISH_READONLY', 'PUBLISH_UNPUBLISH_VOLUME']);
    const id = 'circle-1';
    const created = await csi.ctl('CreateVolume', { name: id, parameters: { volumeId: id, createIfMissing: 'true', size: '16Mi' }, volume_capabilities: [mountCap()] });
    const ctx = created.volume.volume_context;
    const pub = await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap(), volume_context: ctx });
    const staging = stagingPath(csi.s.kubeletDir, id);
    await csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: mountCap(), volume_context: ctx });
    const target = targetPath(csi.s.kubeletDir, 'uid-c', id);
    await csi.node('NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: mountCap(), volume_context: ctx });
    expect(mountsAt(target)).toBe(1);
    writeFileSync(join(target, 'round'), 'trip');
    expect(readFileSync(join(staging, 'round'), 'utf8')).toBe('trip');
    await csi.node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    await csi.node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    expect(mountsAt(target) + mountsAt(staging)).toBe(0);
  });
});
