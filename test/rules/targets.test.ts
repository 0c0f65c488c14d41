import { existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { mountsBelow } from '../csi/helpers/scratch.js';
import { mountCap, stagingPath } from '../csi/helpers/requests.js';
import { flexOptions } from '../helpers/flex-runner.js';
import { type Ask, useFrontEnds, verdictTable } from './front-ends.js';

/**
 * Every path a caller names for a mount lies under the kubelet dir, after symlinks too
 * (checkedPathUnder in shared/core/mount-target.ts), asked of the FlexVolume executable and the CSI
 * server. The paths that escape lead into the suite's scratch dir, never to a real system path.
 */
const fronts = useFrontEnds();
const { csi, flex, grpc } = fronts;
const outside = () => join(csi.s.root, 'outside');
const kubelet = () => csi.s.kubeletDir;

beforeAll(async () => {
  await fronts.create('roots', '--backend', 'dir', '--size', '1Mi');
  await fronts.attach('csi', 'roots', 'node-a');
  mkdirSync(outside(), { recursive: true });
  mkdirSync(join(kubelet(), 'pods'), { recursive: true });
  symlinkSync(outside(), join(kubelet(), 'pods/escape'));
  symlinkSync(join(csi.s.root, 'nowhere'), join(kubelet(), 'pods/dangling'));
});

/** Each model's every call that names a target or staging path, all given `path`. */
function callsAt(path: string): Record<string, Ask> {
  const opts = flexOptions('pv-roots', { volumeId: 'roots' });
  const staging = stagingPath(kubelet(), 'roots');
  return {
    'flex mountdevice': flex('mountdevice', path, '', opts),
    'flex mount': flex('mount', path, opts),
    'flex unmount': flex('unmount', path),
    'flex unmountdevice': flex('unmountdevice', path),
    'csi NodeStageVolume': grpc(() => csi.node('NodeStageVolume', { volume_id: 'roots', staging_target_path: path, volume_capability: mountCap() })),
    'csi NodePublishVolume': grpc(() =>
      csi.node('NodePublishVolume', { volume_id: 'roots', staging_target_path: staging, target_path: path, volume_capability: mountCap() }),
    ),
    'csi NodeUnpublishVolume': grpc(() => csi.node('NodeUnpublishVolume', { volume_id: 'roots', target_path: path })),
    'csi NodeUnstageVolume': grpc(() => csi.node('NodeUnstageVolume', { volume_id: 'roots', staging_target_path: path })),
  };
}

describe('a mount target outside the allowed root is refused (checkedPathUnder)', () => {
  verdictTable([
    { rule: 'a path outside the kubelet dir', asks: () => callsAt(join(outside(), 'mount')), refused: true, reason: /is outside /, code: 'INVALID_ARGUMENT' },
    { rule: 'the kubelet dir itself', asks: () => callsAt(kubelet()), refused: true, reason: /is outside /, code: 'INVALID_ARGUMENT' },
    {
      rule: 'a path that climbs out with ..',
      asks: () => callsAt(`${kubelet()}/pods/../../outside/mount`),
      refused: true,
      reason: /is not a normalised path/,
      code: 'INVALID_ARGUMENT',
    },
    { rule: 'a relative path', asks: () => callsAt('pods/x/mount'), refused: true, reason: /must be an absolute path/, code: 'INVALID_ARGUMENT' },
    {
      rule: 'a path under the kubelet dir that a symbolic link leads out of it',
      asks: () => callsAt(join(kubelet(), 'pods/escape/vol/mount')),
      refused: true,
      reason: /resolves outside /,
      code: 'INVALID_ARGUMENT',
    },
    {
      rule: 'a path through a dangling symbolic link (mkdir and mount would follow it)',
      asks: () => callsAt(join(kubelet(), 'pods/dangling/mount')),
      refused: true,
      reason: /passes through a dangling symbolic link/,
      code: 'INVALID_ARGUMENT',
    },
  ]);

  it('nothing was made or mounted outside the kubelet dir', () => {
    expect(readdirSync(outside())).toEqual([]);
    expect(existsSync(join(csi.s.root, 'nowhere'))).toBe(false);
    expect(mountsBelow(csi.s.root)).toEqual([]);
  });
});
