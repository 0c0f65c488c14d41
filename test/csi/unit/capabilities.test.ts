import { describe, expect, it } from 'vitest';
import { accessRequestOf, mismatch, parseCapabilities, parseCapability } from '../../../csi/capabilities.js';
import type { AccessModeName, VolumeCapability } from '../../../csi/csi-types.js';
import type { AccessRequest, VolumeShape } from '../../../shared/core/access.js';
import { expectThrows } from '../../shared/expect-error.js';

type Mode = Exclude<AccessModeName, 'UNKNOWN'>;

/** A capability as proto-loader hands it over (defaults filled, the oneof named in access_type). */
function mountCap(mode: Mode, fsType = '', extra: { mount_flags?: string[]; volume_mount_group?: string } = {}): VolumeCapability {
  return {
    mount: { fs_type: fsType, mount_flags: extra.mount_flags ?? [], volume_mount_group: extra.volume_mount_group ?? '' },
    access_type: 'mount',
    access_mode: { mode },
  };
}
const blockCap = (mode: Mode): VolumeCapability => ({ block: {}, access_type: 'block', access_mode: { mode } });

/** What each CSI access mode means to the core, written out rather than derived (csi/capabilities.ts). */
const MODES: Record<Mode, Pick<AccessRequest, 'scope' | 'readerOnly' | 'singleWriter'>> = {
  SINGLE_NODE_WRITER: { scope: 'single-node', readerOnly: false, singleWriter: false },
  SINGLE_NODE_READER_ONLY: { scope: 'single-node', readerOnly: true, singleWriter: false },
  SINGLE_NODE_SINGLE_WRITER: { scope: 'single-node', readerOnly: false, singleWriter: true },
  SINGLE_NODE_MULTI_WRITER: { scope: 'single-node', readerOnly: false, singleWriter: false },
  MULTI_NODE_READER_ONLY: { scope: 'multi-node', readerOnly: true, singleWriter: false },
  MULTI_NODE_SINGLE_WRITER: { scope: 'multi-node', readerOnly: false, singleWriter: false },
  MULTI_NODE_MULTI_WRITER: { scope: 'multi-node', readerOnly: false, singleWriter: false },
};
const ALL_MODES = Object.keys(MODES) as Mode[];

const rows = ALL_MODES.flatMap((mode) => [
  ...['', 'ext4', 'xfs'].map((fsType) => ({ mode, kind: `mount ${fsType || '(no fs_type)'}`, cap: mountCap(mode, fsType), raw: false, fsType })),
  { mode, kind: 'block', cap: blockCap(mode), raw: true, fsType: '' },
]);

describe('capability mapping: every access mode × access type × fs_type becomes one core AccessRequest', () => {
  it.each(rows)('$mode with $kind access', ({ mode, cap, raw, fsType }) => {
    expect(accessRequestOf(parseCapability(cap))).toEqual({ ...MODES[mode], raw, fsType });
  });

  it('the oneof is read from the member that is set when access_type is missing', () => {
    const { access_type: _m, ...mount } = mountCap('SINGLE_NODE_WRITER', 'xfs');
    const { access_type: _b, ...block } = blockCap('SINGLE_NODE_WRITER');
    expect(parseCapability(mount)).toMatchObject({ access: 'mount', fsType: 'xfs' });
    expect(parseCapability(block)).toMatchObject({ access: 'block', fsType: '' });
  });

  it('block access ignores mount fields sent alongside it: a raw device has no fs type or flags', () => {
    const cap: VolumeCapability = { ...blockCap('SINGLE_NODE_WRITER'), mount: { fs_type: 'xfs', mount_flags: ['noatime'], volume_mount_group: '5' } };
    expect(parseCapability(cap)).toEqual({
      access: 'block', mode: 'SINGLE_NODE_WRITER', scope: 'single-node', readerOnly: false, fsType: '', mountFlags: [],
    });
  });

  it('mount flags are kept in order and volume_mount_group becomes a gid', () => {
    const parsed = parseCapability(mountCap('SINGLE_NODE_WRITER', 'ext4', { mount_flags: ['noatime', 'discard'], volume_mount_group: '4000' }));
    expect(parsed).toMatchObject({ mountFlags: ['noatime', 'discard'], mountGroup: 4000 });
    expect(parseCapability(mountCap('SINGLE_NODE_WRITER'))).not.toHaveProperty('mountGroup');
  });
});

describe('capability parsing refuses what is missing or malformed, naming the field', () => {
  it('a missing capability is INVALID_ARGUMENT', () => {
    expectThrows(() => parseCapability(undefined), 'InvalidArgument', 'volume_capability is required');
    expectThrows(() => parseCapability(null, 'volume_capabilities[2]'), 'InvalidArgument', 'volume_capabilities[2] is required');
  });

  it.each([
    ['no access_mode', { mount: mountCap('SINGLE_NODE_WRITER').mount, access_mode: null }],
    ['UNKNOWN', { ...mountCap('SINGLE_NODE_WRITER'), access_mode: { mode: 'UNKNOWN' } }],
    ['a mode CSI does not have', { ...mountCap('SINGLE_NODE_WRITER'), access_mode: { mode: 'toString' } }],
  ] as [string, VolumeCapability][])('an access mode is required: %s', (_, cap) => {
    expectThrows(() => parseCapability(cap), 'InvalidArgument', 'volume_capability.access_mode is required');
  });

  it('a capability must choose block or mount access', () => {
    expectThrows(() => parseCapability({ access_mode: { mode: 'SINGLE_NODE_WRITER' } }), 'InvalidArgument', 'must set block or mount access');
  });

  it.each([['--bind'], ['a b'], ['x,y'], ['../up']])('a mount flag that could reach mount(8) as more than an option is refused: %j', (flag) => {
    expectThrows(() => parseCapability(mountCap('SINGLE_NODE_WRITER', '', { mount_flags: [flag] })), 'InvalidArgument', 'is not allowed');
  });

  it.each([['bind'], ['rbind'], ['remount'], ['move'], ['loop'], ['offset=512'], ['rshared'], ['make-private'], ['X-mount.mkdir']])(
    'a mount flag that is an operation of mount(8), not an option, is refused: %j',
    (flag) => {
      // Once passed to mount(8) (INTERNAL with its words), or recorded and ignored on a dir volume.
      expectThrows(() => parseCapability(mountCap('SINGLE_NODE_WRITER', '', { mount_flags: ['noatime', flag] })), 'InvalidArgument', `${flag} is an operation of mount(8), not a mount option`);
    },
  );

  it.each([['-1'], ['abc'], ['4294967295'], ['1.5']])('volume_mount_group must be a group id: %j', (gid) => {
    expectThrows(
      () => parseCapability(mountCap('SINGLE_NODE_WRITER', '', { volume_mount_group: gid })),
      'InvalidArgument',
      'volume_capability.mount.volume_mount_group must be a group id',
    );
  });

  it('a list of capabilities must not be empty, and a bad one is named by its index', () => {
    expectThrows(() => parseCapabilities([]), 'InvalidArgument', 'volume_capabilities is required');
    expectThrows(() => parseCapabilities([mountCap('SINGLE_NODE_WRITER'), { access_mode: null }]), 'InvalidArgument', 'volume_capabilities[1].access_mode is required');
    expect(parseCapabilities([mountCap('SINGLE_NODE_WRITER'), blockCap('SINGLE_NODE_WRITER')]).map((c) => c.access)).toEqual(['mount', 'block']);
  });
});

const volume = (backend: VolumeShape['backend'], access: VolumeShape['access'], fsType: string): VolumeShape => ({ id: 'v', backend, access, fsType });

describe('capability against volume: the core rule (shared/core/access.ts) as CSI asks it', () => {
  it.each([
    ['a block volume refuses a multi-node filesystem', volume('block', 'multi-node', 'ext4'), mountCap('MULTI_NODE_MULTI_WRITER'), /one node at a time can mount/],
    ['a block volume refuses a multi-node reader of its filesystem', volume('block', 'multi-node', 'ext4'), mountCap('MULTI_NODE_READER_ONLY'), /one node at a time can mount/],
    ['a block device is shared between nodes read-only only', volume('block', 'multi-node', 'ext4'), blockCap('MULTI_NODE_MULTI_WRITER'), /read-only only/],
    ['... and a single writer among readers is still a writer', volume('block', 'multi-node', 'ext4'), blockCap('MULTI_NODE_SINGLE_WRITER'), /read-only only/],
    ['a single-node volume refuses a multi-node mode', volume('block', 'single-node', 'ext4'), blockCap('MULTI_NODE_READER_ONLY'), /created for single-node access/],
    ['a dir volume has no block device', volume('dir', 'single-node', ''), blockCap('SINGLE_NODE_WRITER'), /has no block device; use mount access/],
    ['a static volume has no block device', volume('static', 'single-node', 'tmpfs'), blockCap('SINGLE_NODE_WRITER'), /has no block device/],
    ['a block volume holds its own filesystem type', volume('block', 'single-node', 'ext4'), mountCap('SINGLE_NODE_WRITER', 'xfs'), /holds ext4, not xfs/],
    ['a static volume holds its own filesystem type', volume('static', 'single-node', 'tmpfs'), mountCap('SINGLE_NODE_WRITER', 'ext4'), /holds tmpfs, not ext4/],
    ['a multi-node dir volume still refuses raw block', volume('dir', 'multi-node', ''), blockCap('MULTI_NODE_READER_ONLY'), /has no block device/],
  ])('%s', (_, shape, cap, reason) => {
    expect(mismatch(shape, parseCapability(cap))).toMatch(reason);
  });

  it.each([
    ['a block volume read raw by many nodes', volume('block', 'multi-node', 'ext4'), blockCap('MULTI_NODE_READER_ONLY')],
    ['a block volume as a single-node filesystem of its own type', volume('block', 'single-node', 'ext4'), mountCap('SINGLE_NODE_WRITER', 'ext4')],
    ['a block volume as a filesystem of any type the CO leaves open', volume('block', 'single-node', 'xfs'), mountCap('SINGLE_NODE_MULTI_WRITER')],
    ['a block volume raw, whatever its filesystem', volume('block', 'single-node', 'xfs'), blockCap('SINGLE_NODE_SINGLE_WRITER')],
    ['a dir volume under any fs_type (it has none to contradict)', volume('dir', 'single-node', ''), mountCap('SINGLE_NODE_WRITER', 'xfs')],
    ['a multi-node dir volume written by many nodes', volume('dir', 'multi-node', ''), mountCap('MULTI_NODE_MULTI_WRITER')],
    ['a multi-node volume used by one node', volume('dir', 'multi-node', ''), mountCap('SINGLE_NODE_READER_ONLY')],
    ['a static volume of its own type', volume('static', 'multi-node', 'tmpfs'), mountCap('MULTI_NODE_SINGLE_WRITER', 'tmpfs')],
  ])('fits: %s', (_, shape, cap) => {
    expect(mismatch(shape, parseCapability(cap))).toBeUndefined();
  });
});
