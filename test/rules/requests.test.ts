import { beforeAll, describe } from 'vitest';
import { MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { flexOptions } from '../helpers/flex-runner.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { type Ask, type Row, useFrontEnds, verdictTable } from './front-ends.js';

/**
 * What a request may say of a volume that exists (shared/core/contradiction.ts, shared/core/volumes.ts),
 * asked of the admin CLI, the FlexVolume executable and the CSI server over one catalog.
 */
const fronts = useFrontEnds();
const { csi, cli, flex, grpc, validate } = fronts;

beforeAll(async () => {
  await fronts.create('told', '--size', '16Mi');
  await fronts.create('scratch', '--backend', 'static', '--source', 'tmpfs', '--fs-type', 'tmpfs', '--mount-options', 'size=8m');
  await fronts.create('plain', '--backend', 'dir', '--size', '1Mi');
});

/** The calls whose request describes the volume: FlexVolume's options, CSI's volume_context. */
type Claimant = 'flex mountdevice' | 'flex attach' | 'csi NodeStageVolume' | 'csi NodePublishVolume' | 'csi ValidateVolumeCapabilities';
const BOTH: Claimant[] = ['flex mountdevice', 'flex attach', 'csi NodeStageVolume', 'csi NodePublishVolume', 'csi ValidateVolumeCapabilities'];
/** Keys FlexVolume refuses as unknown options before this rule (or, for volumeId, reads as the name). */
const CSI_ONLY: Claimant[] = ['csi NodeStageVolume', 'csi NodePublishVolume', 'csi ValidateVolumeCapabilities'];
const FLEX_ONLY: Claimant[] = ['flex mountdevice', 'flex attach'];

function claim(id: string, claims: Record<string, string>, who: readonly Claimant[]): Record<string, Ask> {
  const staging = stagingPath(csi.s.kubeletDir, id);
  const all: Record<Claimant, Ask> = {
    'flex mountdevice': flex('mountdevice', deviceMountPath(csi.s.kubeletDir, `pv-${id}`), '', flexOptions(`pv-${id}`, { volumeId: id, ...claims })),
    'flex attach': flex('attach', flexOptions(`pv-${id}`, { volumeId: id, ...claims }), 'node-a'),
    'csi NodeStageVolume': grpc(() => csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: mountCap(), volume_context: claims })),
    'csi NodePublishVolume': grpc(() =>
      csi.node('NodePublishVolume', {
        volume_id: id,
        staging_target_path: staging,
        target_path: targetPath(csi.s.kubeletDir, 'pod-1', id),
        volume_capability: mountCap(),
        volume_context: claims,
      }),
    ),
    'csi ValidateVolumeCapabilities': validate({ volume_id: id, volume_capabilities: [mountCap()], volume_context: claims }),
  };
  return Object.fromEntries(who.map((w) => [w, all[w]]));
}

/** A claim the catalog contradicts; the refusal names `named` (the key, or what the adapter maps it to). */
const contradicting = (id: string, key: string, value: string, who: readonly Claimant[], why = '', named = key): Row => ({
  rule: `${key} = ${JSON.stringify(value)} contradicts volume ${id}${why}`,
  asks: () => claim(id, { [key]: value }, who),
  refused: true,
  reason: new RegExp(`"${named}" does not match volume ${id}: what is mounted comes from the catalog`),
  code: 'INVALID_ARGUMENT',
});

describe('a request may repeat the catalog but never contradict it (contradiction)', () => {
  verdictTable([
    contradicting('told', 'backend', 'dir', BOTH),
    contradicting('told', 'fsType', 'xfs', BOTH),
    contradicting('told', 'source', '/etc', BOTH, ': a block volume has none'),
    contradicting('told', 'mountOptions', 'bind', BOTH, ': a block volume has none'),
    contradicting('scratch', 'source', '/', BOTH),
    contradicting('scratch', 'mountOptions', 'size=64m', BOTH),
    contradicting('scratch', 'fsType', 'ext4', BOTH),
    contradicting('told', 'volumeId', 'other', CSI_ONLY, ' (in FlexVolume options volumeId names the volume)'),
    contradicting('told', 'path', '/', CSI_ONLY, ' (FlexVolume refuses path as an unknown option)'),
    contradicting('told', 'device', '/dev/sda', CSI_ONLY, ' (FlexVolume refuses device as an unknown option)'),
    contradicting('told', 'FsType', 'xfs', CSI_ONLY, ': keys are compared lower-cased'),
    contradicting('told', 'kubernetes.io/fsType', 'xfs', FLEX_ONLY, ': kubelet\'s fsType from the PV is held against a volume that has one', 'fsType'),
    {
      rule: 'a request that repeats the catalog is accepted',
      asks: () => ({
        ...claim('told', { backend: 'block', fsType: 'ext4' }, ['csi ValidateVolumeCapabilities']),
        ...claim('scratch', { backend: 'static', fsType: 'tmpfs', source: 'tmpfs', mountOptions: 'size=8m' }, ['csi ValidateVolumeCapabilities']),
        'flex getvolumename': flex('getvolumename', flexOptions('pv-told', { volumeId: 'told', backend: 'block', fsType: 'ext4', 'kubernetes.io/fsType': 'ext4' })),
      }),
      refused: false,
    },
    {
      rule: 'an empty value claims nothing',
      asks: () => ({
        ...claim('told', { source: '', fsType: '' }, ['csi ValidateVolumeCapabilities']),
        'flex getvolumename': flex('getvolumename', flexOptions('pv-told', { volumeId: 'told', source: '' })),
      }),
      refused: false,
    },
    {
      rule: 'a filesystem type says nothing of a dir volume, which has none',
      asks: () => ({
        'csi ValidateVolumeCapabilities': validate({ volume_id: 'plain', volume_capabilities: [mountCap('xfs')] }),
        'flex getvolumename': flex('getvolumename', flexOptions('pv-plain', { volumeId: 'plain', 'kubernetes.io/fsType': 'ext4' })),
      }),
      refused: false,
    },
  ]);
});

describe('a repeated create may repeat the spec, never change it (createVolume)', () => {
  verdictTable([
    {
      rule: 'the same id with another size is ALREADY_EXISTS, naming what differs',
      asks: () => ({
        'cli volume create': cli('create', 'told', '--size', '32Mi'),
        'csi CreateVolume': grpc(() => csi.ctl('CreateVolume', { name: 'told', volume_capabilities: [mountCap()], capacity_range: size(32 * MiB) })),
      }),
      refused: true,
      reason: /volume told already exists with another spec \(size 16777216 bytes\)/,
      code: 'ALREADY_EXISTS',
    },
    {
      rule: 'the same id with another backend is ALREADY_EXISTS',
      asks: () => ({
        'cli volume create': cli('create', 'told', '--backend', 'dir', '--size', '16Mi'),
        'csi CreateVolume': grpc(() => csi.ctl('CreateVolume', { name: 'told', parameters: { backend: 'dir' }, volume_capabilities: [mountCap()], capacity_range: size(16 * MiB) })),
      }),
      refused: true,
      reason: /volume told already exists with another spec \(backend block, fsType ext4\b/,
      code: 'ALREADY_EXISTS',
    },
    {
      rule: 'the same create repeated answers the volume that exists, whichever front end made it',
      asks: () => ({
        'cli volume create': cli('create', 'told', '--size', '16Mi'),
        'csi CreateVolume': grpc(() => csi.ctl('CreateVolume', { name: 'told', volume_capabilities: [mountCap()], capacity_range: size(16 * MiB) })),
      }),
      refused: false,
    },
  ]);
});
