import { describe, expect, it } from 'vitest';
import { outcome } from '../csi/helpers/client.js';
import { mountCap, targetPath } from '../csi/helpers/requests.js';
import { type ExecSuite, useExecServer } from './helpers.js';

/**
 * A FlexVolume driver's supportsMetrics (init capabilities, default false), as kubelet reads it
 * (kubernetes pkg/volume/flexvolume plugin.go newMounterInternal): true, the pod's volume directory is
 * measured with statfs (MetricsStatFS); false, MetricsNil, whose "not supported" kubelet's stats skip.
 * Through the real CSI server, beside the built-in backends and fronting one driver.
 */
const mixed = useExecServer();
const metrics = useExecServer(() => ['--backends', 'exec', '--flex-driver', 'acme/metrics']);
const plain = useExecServer(() => ['--backends', 'exec', '--flex-driver', 'acme/tmpfs']);

const nodeCaps = async (csi: ExecSuite) => (await csi.node('NodeGetCapabilities', {})).capabilities.map((c) => c.rpc.type).sort();

/** A tmpfs volume of `driver` (8 MiB, test/exec/drivers/tmpfs.sh) published for a pod; returns its target. */
async function published(csi: ExecSuite, driver: string, id: string): Promise<string> {
  const target = targetPath(csi.s.kubeletDir, `uid-${id}`, id);
  await csi.node('NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: { backend: 'exec', driver } });
  return target;
}

describe('exec backend: volume stats follow the driver\'s supportsMetrics', () => {
  it('beside the built-in backends: a driver that supports metrics gets statfs usage, one that does not gets none', async () => {
    const measured = await published(mixed, 'acme/metrics', 'with-metrics');
    const stats = await mixed.node('NodeGetVolumeStats', { volume_id: 'with-metrics', volume_path: measured });
    expect(stats.usage.find((u) => u.unit === 'BYTES')).toMatchObject({ total: String(8 * 2 ** 20) });

    const unmeasured = await published(mixed, 'acme/tmpfs', 'without-metrics');
    const refused = await outcome(mixed.node('NodeGetVolumeStats', { volume_id: 'without-metrics', volume_path: unmeasured }));
    // Not zeros, which a CO would take for a volume of no size: kubelet skips the volume, as for MetricsNil.
    expect(refused).toEqual({ code: 'UNIMPLEMENTED', message: expect.stringContaining('FlexVolume driver acme/tmpfs does not report metrics') });
    // The path is still checked first: a path the volume is not at is NOT_FOUND, as for any volume.
    expect((await outcome(mixed.node('NodeGetVolumeStats', { volume_id: 'without-metrics', volume_path: measured }))).code).toBe('NOT_FOUND');

    for (const [id, target] of [['with-metrics', measured], ['without-metrics', unmeasured]] as const) await mixed.node('NodeUnpublishVolume', { volume_id: id, target_path: target });
  });

  it('fronting one driver: GET_VOLUME_STATS only when its init says supportsMetrics', async () => {
    expect(await nodeCaps(metrics)).toEqual(['GET_VOLUME_STATS', 'VOLUME_MOUNT_GROUP']);
    expect(await nodeCaps(plain)).toEqual(['VOLUME_MOUNT_GROUP']);
    const target = await published(metrics, 'acme/metrics', 'only-metrics');
    const stats = await metrics.node('NodeGetVolumeStats', { volume_id: 'only-metrics', volume_path: target });
    expect(stats.usage.map((u) => u.unit)).toEqual(['BYTES', 'INODES']);
    await metrics.node('NodeUnpublishVolume', { volume_id: 'only-metrics', target_path: target });
  });
});
