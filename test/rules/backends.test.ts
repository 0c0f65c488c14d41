import { mkdirSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { MiB, blockCap, mountCap, size, stagingPath } from '../csi/helpers/requests.js';
import { flexOptions } from '../helpers/flex-runner.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { useFrontEnds, verdictTable } from './front-ends.js';

/**
 * What each backend can be (shared/core/access.ts, shared/static-source.ts, shared/backends/static.ts),
 * asked of the admin CLI, the FlexVolume executable and the CSI server over one catalog.
 */
const fronts = useFrontEnds();
const { csi, cli, flex, grpc, validate } = fronts;
const opts = (id: string, extra: Record<string, string> = {}) => flexOptions(`pv-${id}`, { volumeId: id, ...extra });

beforeAll(async () => {
  await fronts.create('blk', '--size', '16Mi');
  await fronts.create('plain', '--backend', 'dir', '--size', '1Mi');
  await fronts.create('fixed', '--backend', 'static', '--source', 'tmpfs', '--fs-type', 'tmpfs');
});

describe('access mode against backend (accessMismatch)', () => {
  verdictTable([
    {
      rule: 'a block volume is never a multi-node filesystem, whether being made or already made',
      asks: () => ({
        'cli volume create': cli('create', 'multi-cli', '--size', '16Mi', '--access', 'multi-node'),
        'flex attach (createIfMissing)': flex('attach', opts('multi-flex', { createIfMissing: 'true', size: '16Mi', access: 'multi-node' }), 'node-a'),
        'csi CreateVolume': grpc(() => csi.ctl('CreateVolume', { name: 'multi-csi', volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')], capacity_range: size(16 * MiB) })),
        'csi ControllerPublishVolume': grpc(() => csi.ctl('ControllerPublishVolume', { volume_id: 'blk', node_id: 'node-a', volume_capability: mountCap('', 'MULTI_NODE_READER_ONLY') })),
        'csi ValidateVolumeCapabilities': validate({ volume_id: 'blk', volume_capabilities: [mountCap('', 'MULTI_NODE_SINGLE_WRITER')] }),
      }),
      refused: true,
      reason: /a block volume holds a filesystem that one node at a time can mount; use single-node access/,
      code: 'INVALID_ARGUMENT',
    },
    {
      rule: 'a multi-node dir volume is made by every front end',
      asks: () => ({
        'cli volume create': cli('create', 'shared-cli', '--backend', 'dir', '--size', '1Mi', '--access', 'multi-node'),
        'flex attach (createIfMissing)': flex('attach', opts('shared-flex', { createIfMissing: 'true', backend: 'dir', size: '1Mi', access: 'multi-node' }), 'node-a'),
        'csi CreateVolume': grpc(() =>
          csi.ctl('CreateVolume', { name: 'shared-csi', parameters: { backend: 'dir' }, volume_capabilities: [mountCap('', 'MULTI_NODE_MULTI_WRITER')], capacity_range: size(MiB) }),
        ),
      }),
      refused: false,
    },
    {
      rule: 'a dir volume has no raw block device, at any CSI call that can ask for one (FlexVolume cannot)',
      asks: () => {
        const staging = stagingPath(csi.s.kubeletDir, 'plain');
        mkdirSync(staging, { recursive: true });
        return {
          'csi CreateVolume': grpc(() => csi.ctl('CreateVolume', { name: 'raw-dir', parameters: { backend: 'dir' }, volume_capabilities: [blockCap()], capacity_range: size(MiB) })),
          'csi ControllerPublishVolume': grpc(() => csi.ctl('ControllerPublishVolume', { volume_id: 'plain', node_id: 'node-a', volume_capability: blockCap() })),
          'csi NodeStageVolume': grpc(() => csi.node('NodeStageVolume', { volume_id: 'plain', staging_target_path: staging, volume_capability: blockCap() })),
          'csi ValidateVolumeCapabilities': validate({ volume_id: 'plain', volume_capabilities: [blockCap()] }),
        };
      },
      refused: true,
      reason: /a dir volume has no block device; use mount access/,
      code: 'INVALID_ARGUMENT',
    },
  ]);

  it('nothing refused was made', async () => {
    const ids = (await csi.ctl('ListVolumes', {})).entries.map((e) => e.volume.volume_id);
    expect(ids.filter((id) => /^multi-|^raw-/.test(id))).toEqual([]);
  });
});

describe('a host-path static source is the administrator\'s to choose (requireSourceAllowed)', () => {
  const etc = { backend: 'static', source: '/etc', fsType: 'none', mountOptions: 'bind' };
  verdictTable([
    {
      rule: 'a PV or StorageClass writer may not choose one outside staticSourceRoots',
      asks: () => ({
        'flex attach (createIfMissing)': flex('attach', opts('etc-flex', { createIfMissing: 'true', ...etc }), 'node-a'),
        'csi CreateVolume': grpc(() => csi.ctl('CreateVolume', { name: 'etc-csi', parameters: etc, volume_capabilities: [mountCap()] })),
      }),
      refused: true,
      reason: /static source \/etc is a host path: only an administrator may choose one/,
      code: 'INVALID_ARGUMENT',
    },
    {
      rule: 'the administrator may choose any',
      asks: () => ({ 'cli volume create': cli('create', 'etc-admin', '--backend', 'static', '--source', '/etc', '--fs-type', 'none', '--mount-options', 'bind') }),
      refused: false,
    },
  ]);
});

describe('a static volume\'s size is not twinvol\'s to grow (expandVolume, static backend)', () => {
  const flexExpand = (id: string, bytes: number) => flex('expandvolume', opts(id), deviceMountPath(csi.s.kubeletDir, `pv-${id}`), String(bytes), String(MiB));
  const csiExpand = (id: string, bytes: number) => grpc(() => csi.ctl('ControllerExpandVolume', { volume_id: id, capacity_range: size(bytes) }));
  verdictTable([
    {
      rule: 'expanding a static volume is refused by both models',
      asks: () => ({ 'flex expandvolume': flexExpand('fixed', 2 * MiB), 'csi ControllerExpandVolume': csiExpand('fixed', 2 * MiB) }),
      refused: true,
      reason: /volume fixed is static: twinvol does not own its size/,
      code: 'INVALID_ARGUMENT',
    },
    {
      rule: 'a dir volume grows through either model',
      asks: () => ({ 'flex expandvolume': flexExpand('plain', 2 * MiB), 'csi ControllerExpandVolume': csiExpand('plain', 3 * MiB) }),
      refused: false,
    },
  ]);
});
