// NodePublishVolume of an inline (ephemeral) volume: the volume is made by the publish and removed
// by the unpublish (csi/ephemeral.ts). Apart from test/csi/node.test.ts so that neither passes 400 lines.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { loopsLeftUnder } from '../helpers/scratch.js';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { repeatedOk } from './helpers/repeat.js';
import { blockCap, MiB, mountCap, size, targetPath } from './helpers/requests.js';
import { loopsBelow, mountsBelow } from './helpers/scratch.js';
import { treeOf } from './helpers/tree.js';

const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;

/** The volume's catalog record as written, or undefined once it is gone. */
function record(id: string): { parameters: Record<string, string>; lifetime?: string; schema: number } | undefined {
  try {
    return JSON.parse(readFileSync(join(csi.s.dataRoot, 'volumes', id, 'volume.json'), 'utf8'));
  } catch {
    return undefined;
  }
}

describe('inline ephemeral volumes', () => {
  const ephemeral = (extra: Record<string, string> = {}) => ({ 'csi.storage.k8s.io/ephemeral': 'true', 'csi.storage.k8s.io/pod.name': 'web-0', ...extra });

  it('creates a dir volume on publish and deletes it on unpublish', async () => {
    const id = 'csi-0123456789abcdef';
    const t = targetPath(csi.s.kubeletDir, 'pod-eph', 'scratch');
    const req = { volume_id: id, target_path: t, volume_capability: mountCap(), volume_context: ephemeral({ size: '16Mi' }) };
    await repeatedOk('NodePublishVolume ephemeral', () => node('NodePublishVolume', req));
    expect(mountAt(t)).toBeDefined();
    expect(record(id)).toMatchObject({ parameters: { size: '16Mi', ephemeral: 'true' }, lifetime: 'pod' });
    writeFileSync(join(t, 'scratch.txt'), 'temporary');
    await repeatedOk('NodeUnpublishVolume ephemeral', () => node('NodeUnpublishVolume', { volume_id: id, target_path: t }));
    expect(existsSync(t)).toBe(false);
    expect(record(id)).toBeUndefined();
    expect(existsSync(join(csi.s.dataRoot, 'volumes', id))).toBe(false);
  });

  it('one recorded before the lifetime mark (schema 6) is still the same volume to a repeated publish, and still goes with its unpublish', async () => {
    const id = 'csi-before-lifetime';
    const t = targetPath(csi.s.kubeletDir, 'pod-eph-6', 'scratch');
    const req = { volume_id: id, target_path: t, volume_capability: mountCap(), volume_context: ephemeral({ size: '16Mi' }) };
    await node('NodePublishVolume', req);
    const { lifetime: _, ...before } = record(id) ?? { parameters: {}, schema: 0 };
    const file = join(csi.s.dataRoot, 'volumes', id, 'volume.json');
    writeFileSync(`${file}.new`, JSON.stringify({ ...before, schema: 6 }));
    renameSync(`${file}.new`, file);
    await node('NodePublishVolume', req);
    expect(record(id)).toMatchObject({ schema: 6, parameters: { ephemeral: 'true' } });
    await node('NodeUnpublishVolume', { volume_id: id, target_path: t });
    expect(record(id)).toBeUndefined();
  });

  it('creates a block volume with a filesystem when asked, and leaves no loop device behind', async () => {
    const id = 'csi-block-eph';
    const t = targetPath(csi.s.kubeletDir, 'pod-eph-b', 'scratch');
    await node('NodePublishVolume', { volume_id: id, target_path: t, volume_capability: mountCap(), volume_context: ephemeral({ backend: 'block', size: '64Mi', fsType: 'ext4' }) });
    expect(mountAt(t)?.fsType).toBe('ext4');
    expect(loopsBelow(csi.s.root)).toHaveLength(1);
    await node('NodeUnpublishVolume', { volume_id: id, target_path: t });
    expect(await loopsLeftUnder(csi.s.root)).toEqual([]);
    expect(mountsBelow(csi.s.root)).toEqual([]);
    expect(record(id)).toBeUndefined();
  });

  it('a reader-only access mode publishes read-only even when readonly is false (dir and block)', async () => {
    // Once a pod given SINGLE_NODE_READER_ONLY could write: the mode was read for staged volumes only.
    for (const backend of ['dir', 'block']) {
      const id = `csi-rox-${backend}`;
      const t = targetPath(csi.s.kubeletDir, `pod-rox-${backend}`, 'scratch');
      const req = { volume_id: id, target_path: t, volume_capability: mountCap('', 'SINGLE_NODE_READER_ONLY'), volume_context: ephemeral({ backend, size: '16Mi' }), readonly: false };
      try {
        await node('NodePublishVolume', req);
        expect(mountAt(t)?.mountOptions).toContain('ro');
        expect(() => writeFileSync(join(t, 'written.txt'), 'x')).toThrow(/EROFS/);
        await node('NodePublishVolume', req);
      } finally {
        await node('NodeUnpublishVolume', { volume_id: id, target_path: t });
      }
      expect(record(id)).toBeUndefined();
    }
    expect(mountsBelow(csi.s.root)).toEqual([]);
  });

  it('a reader-only publish an older twinvol made read-write still answers the same request, and goes with its unpublish', async () => {
    // Releases before the reader-only hold of inline volumes published them as readonly said. Once the
    // repeat of that very request (after a node plugin upgrade) was ALREADY_EXISTS "published read-write".
    const id = 'csi-rox-older';
    const t = targetPath(csi.s.kubeletDir, 'pod-rox-older', 'scratch');
    const req = { volume_id: id, target_path: t, volume_capability: mountCap('', 'SINGLE_NODE_READER_ONLY'), volume_context: ephemeral({ size: '16Mi' }), readonly: false };
    await node('NodePublishVolume', req);
    // As the older release left it: its record says read-write, and so does the mount.
    const mounts = join(csi.s.stateDir, 'mounts');
    const [file = ''] = readdirSync(mounts).filter((n) => n.startsWith(`${id}@`));
    const written = JSON.parse(readFileSync(join(mounts, file), 'utf8'));
    writeFileSync(join(mounts, `${file}.new`), JSON.stringify({ ...written, readonly: false }));
    renameSync(join(mounts, `${file}.new`), join(mounts, file));
    execFileSync('mount', ['-o', 'remount,bind,rw', t]);
    try {
      await node('NodePublishVolume', req);
    } finally {
      await node('NodeUnpublishVolume', { volume_id: id, target_path: t });
    }
    expect(record(id)).toBeUndefined();
    expect(mountsBelow(csi.s.root)).toEqual([]);
  });

  it('refuses bad ids, unknown attributes, static backends and raw block access, making nothing', async () => {
    const t = targetPath(csi.s.kubeletDir, 'pod-eph-bad', 'scratch');
    const before = treeOf(csi.s.dataRoot);
    const bad = [
      { volume_id: '../etc', volume_context: ephemeral() },
      { volume_id: 'csi-x', volume_context: ephemeral({ source: '/etc' }) },
      { volume_id: 'csi-x', volume_context: ephemeral({ backend: 'static' }) },
      { volume_id: 'csi-x', volume_context: ephemeral({ size: 'huge' }) },
    ];
    for (const r of bad) await expectCode(node('NodePublishVolume', { ...r, target_path: t, volume_capability: mountCap() }), 'INVALID_ARGUMENT');
    await expectCode(node('NodePublishVolume', { volume_id: 'csi-x', target_path: t, volume_capability: blockCap(), volume_context: ephemeral() }), 'INVALID_ARGUMENT');
    expect(treeOf(csi.s.dataRoot)).toEqual(before);
    expect(existsSync(t)).toBe(false);
  });

  it('never takes, nor deletes, a provisioned volume that has the same id', async () => {
    await ctl('CreateVolume', { name: 'csi-collide', volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const t = targetPath(csi.s.kubeletDir, 'pod-c', 'scratch');
    await expectCode(node('NodePublishVolume', { volume_id: 'csi-collide', target_path: t, volume_capability: mountCap(), volume_context: ephemeral() }), 'ALREADY_EXISTS');
    await node('NodeUnpublishVolume', { volume_id: 'csi-collide', target_path: t });
    expect(record('csi-collide')?.parameters).toEqual({ backend: 'dir' });
    expect(lstatSync(join(csi.s.dataRoot, 'volumes/csi-collide/data')).isDirectory()).toBe(true);
  });
});
