import { readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readMounts } from '../../shared/mountinfo.js';
import { outcome } from '../csi/helpers/client.js';
import { MiB, mountCap, stagingPath } from '../csi/helpers/requests.js';
import { type ExecSuite, type TestDriver, useExecServer } from './helpers.js';

/**
 * kubelet's own work where a driver answers "Not supported" (pkg/volume/flexvolume attacher-defaults.go,
 * expander-defaults.go), through the real CSI server: test/exec/drivers/loop.sh as "loopbare" attaches
 * and leaves the rest to kubelet; as "loopcrash" it is killed in detach before it does anything.
 */
const strict = useExecServer();

const fsTypeAt = (path: string) => readMounts().find((m) => m.mountPoint === path)?.fsType;

/** A blank sparse image, a static PV of `driver` over it attached to node-a: the publish_context. */
async function attached(csi: ExecSuite, driver: TestDriver, id: string, bytes: number, fsType: string) {
  const image = join(csi.s.root, `${id}.img`);
  writeFileSync(image, '');
  truncateSync(image, bytes);
  const ctx = { backend: 'exec', driver: `acme/${driver}`, fsType, image };
  const pub = await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap(fsType), volume_context: ctx });
  const staging = stagingPath(csi.s.kubeletDir, id);
  const stage = () => csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: mountCap(fsType), volume_context: ctx });
  const teardown = async () => {
    await csi.node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
  };
  return { image, staging, device: pub.publish_context.device ?? '', stage, teardown };
}

describe('exec backend: kubelet\'s fallbacks for "Not supported"', () => {
  it('mountdevice Not supported on a blank device: formatted with the PV\'s fsType and mounted, as kubelet\'s FormatAndMount does', async () => {
    const vol = await attached(strict, 'loopbare', 'bare-fmt-1', 64 * MiB, 'ext4');
    try {
      const r = await outcome(vol.stage());
      expect(r.code, r.message).toBe('OK');
      expect(fsTypeAt(vol.staging)).toBe('ext4');
      // A repeat, and a stage after an unstage, keep the filesystem: formatted only while blank.
      writeFileSync(join(vol.staging, 'kept'), 'data');
      expect((await outcome(vol.stage())).code).toBe('OK');
      await strict.node('NodeUnstageVolume', { volume_id: 'bare-fmt-1', staging_target_path: vol.staging });
      expect(fsTypeAt(vol.staging)).toBeUndefined();
      expect((await outcome(vol.stage())).code).toBe('OK');
      expect(readFileSync(join(vol.staging, 'kept'), 'utf8')).toBe('data');
    } finally {
      await vol.teardown();
    }
  });
});
