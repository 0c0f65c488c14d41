// A data root that must lie on a network filesystem (setting dataRootOnNetwork): no change to the
// catalog while it lies on a local one (shared/store/network-catalog.ts). bindfs, a FUSE mount,
// stands in for the network filesystem; the scratch's own directory on /tmp for a share not mounted.
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.js';
import { attach } from '../../shared/core/attachments.js';
import { type Core, openCore } from '../../shared/core/core.js';
import { createVolume, type CreateVolumeSpec, deleteVolume } from '../../shared/core/volumes.js';
import { notOnNetwork } from '../../shared/store/filesystem.js';
import { hasBindfs, mountBindfs, unmountBindfs } from '../helpers/bindfs.js';
import { nid, vid } from '../helpers/ids.js';
import type { Scratch } from '../helpers/scratch.js';
import { useScratchCore } from './core-scratch.js';
import { expectRejects } from './expect-error.js';

let s: Scratch;
useScratchCore((scratch) => (s = scratch));

function networkCore(dataRoot = s.dataRoot): Core {
  return openCore(loadConfig({ TWINVOL_CONFIG: s.env.TWINVOL_CONFIG }, { dataRoot, stateDir: s.stateDir, kubeletDir: s.kubeletDir, nodeName: 'node-a', dataRootOnNetwork: true }));
}
const dir = (id: string): CreateVolumeSpec => ({ id, backend: 'dir', capacityBytes: 2 ** 20, createdBy: 'cli' });
const NOT_MOUNTED = /the data root .* lies on a local filesystem \(statfs type 0xef53\), and setting dataRootOnNetwork says it is a network filesystem: is that filesystem mounted on this node\? Nothing was changed/;

describe('a data root that must lie on a network filesystem', () => {
  it('tells the filesystems apart: local ones and a missing path are named, others pass', async () => {
    mkdirSync(s.dataRoot, { recursive: true });
    expect(await notOnNetwork(s.dataRoot)).toBe('a local filesystem (statfs type 0xef53)');
    expect(await notOnNetwork('/dev/shm')).toBe('a local filesystem (statfs type 0x1021994)');
    expect(await notOnNetwork(join(s.root, 'absent'))).toBe('nothing: it does not exist');
    expect(await notOnNetwork('/proc')).toBeUndefined();
  });

  it('on a local filesystem, neither creates nor deletes nor attaches, and says why', async () => {
    mkdirSync(s.dataRoot, { recursive: true });
    const core = networkCore();
    await expectRejects(createVolume(core, dir('v')), 'Unavailable', NOT_MOUNTED);
    // Before the check, this answered "already deleted": the CO would forget a PV whose data is on the share.
    await expectRejects(deleteVolume(core, vid('v')), 'Unavailable', NOT_MOUNTED);
    await expectRejects(attach(core, vid('v'), nid('node-a'), { readonly: false, via: 'csi' }), 'Unavailable', NOT_MOUNTED);
    expect(readdirSync(s.dataRoot)).toEqual([]);
    await expectRejects(createVolume(networkCore(join(s.root, 'absent')), dir('v')), 'Unavailable', /lies on nothing: it does not exist/);
  });

  it.skipIf(!hasBindfs)('works while the share is mounted, and stops changing it once it is gone', async () => {
    const share = join(s.root, 'share');
    mountBindfs(share, s.dataRoot);
    const core = networkCore();
    expect((await createVolume(core, dir('kept'))).created).toBe(true);
    expect((await createVolume(core, dir('gone'))).created).toBe(true);
    expect(await deleteVolume(core, vid('gone'))).toBe(true);
    expect(readdirSync(join(share, 'volumes'))).toEqual(['kept']);
    unmountBindfs(s.dataRoot);
    await expectRejects(deleteVolume(core, vid('kept')), 'Unavailable', NOT_MOUNTED);
    expect(existsSync(join(share, 'volumes', 'kept', 'volume.json'))).toBe(true);
  });
});
