// A read-only raw block publish binds a device that refuses writes (shared/backends/block.ts
// readOnlyDevice): the read-only flag of a bind of a device node is not checked when a pod opens the
// node, so a bind of the staging's writable device let every "read-only" pod write the image.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readSync, writeFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { errnoCode } from '../../shared/errors.js';
import { useCsiServer } from './helpers/fixture.js';
import { stagedVolume } from './helpers/pod-mount.js';
import { blockCap, MiB, mountCap, size, stagingPath } from './helpers/requests.js';

const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl, node } = csi;

const image = (id: string) => `${csi.s.dataRoot}/volumes/${id}/image.img`;
/** Loop devices bound to the volume's image, with the kernel's read-only bit of each. */
function loopsOf(id: string): { device: string; readOnly: boolean }[] {
  const out = execFileSync('losetup', ['--list', '--noheadings', '--output', 'NAME,RO', '--associated', image(id)], { encoding: 'utf8' }).trim();
  return out ? out.split('\n').map((l) => ({ device: l.trim().split(/\s+/)[0] ?? '', readOnly: l.trim().split(/\s+/)[1] === '1' })) : [];
}

/** What opening the node for writing and writing one block answers: 'written', or the error code. */
function tryWrite(path: string, text: string): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r+');
    writeSync(fd, Buffer.from(text.padEnd(512, '\0')), 0, 512, 0);
    return 'written';
  } catch (err) {
    return errnoCode(err) ?? String(err);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function readStart(path: string, length: number): string {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(512);
    readSync(fd, buf, 0, 512, 0);
    return buf.subarray(0, length).toString();
  } finally {
    closeSync(fd);
  }
}

async function publishRaw(id: string, staging: string, target: string, readonly: boolean, mode: Parameters<typeof blockCap>[0] = 'SINGLE_NODE_MULTI_WRITER') {
  mkdirSync(dirname(target), { recursive: true });
  await node('NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: blockCap(mode), readonly });
}

describe('a read-only raw block publish', () => {
  it('readonly: true binds a device that refuses writes, beside a writer that still writes; unstage releases both', async () => {
    const id = 'raw-ro';
    const v = await stagedVolume(csi, id, { backend: 'block', cap: blockCap('SINGLE_NODE_MULTI_WRITER') });
    const writer = v.target('writer');
    const reader = v.target('reader');
    await publishRaw(id, v.staging, writer, false);
    await publishRaw(id, v.staging, reader, true);
    // Once 'written': the reader's bind carried a read-only flag over the staging's writable device.
    expect(['EROFS', 'EACCES', 'EPERM']).toContain(tryWrite(reader, 'from the reader'));
    expect(tryWrite(writer, 'from the writer')).toBe('written');
    // The reader sees what the writer wrote: the same image, not a copy.
    execFileSync('blockdev', ['--flushbufs', writer]);
    execFileSync('blockdev', ['--flushbufs', reader]);
    expect(readStart(reader, 15)).toBe('from the writer');
    expect(loopsOf(id).map((l) => l.readOnly).sort()).toEqual([false, true]);

    // A repeat answers the same and binds no other device; a second reader shares the read-only one.
    await publishRaw(id, v.staging, reader, true);
    const second = v.target('reader-2');
    await publishRaw(id, v.staging, second, true);
    expect(tryWrite(second, 'from the second reader')).not.toBe('written');
    expect(loopsOf(id)).toHaveLength(2);

    for (const target of [writer, reader, second]) await node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: v.staging });
    expect(loopsOf(id)).toEqual([]);
    await ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    await ctl('DeleteVolume', { volume_id: id });
  });

  it('a reader-only access mode binds the read-only device even when the request says readonly: false', async () => {
    const id = 'raw-rox';
    const v = await stagedVolume(csi, id, { backend: 'block', cap: blockCap('MULTI_NODE_READER_ONLY') });
    const target = v.target('p');
    await publishRaw(id, v.staging, target, false, 'MULTI_NODE_READER_ONLY');
    expect(tryWrite(target, 'x')).not.toBe('written');
    await node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: v.staging });
    expect(loopsOf(id)).toEqual([]);
  });

  it('a node expansion grows the read-only device too', async () => {
    const id = 'raw-ro-grow';
    const v = await stagedVolume(csi, id, { backend: 'block', cap: blockCap(), bytes: 64 * MiB });
    const target = v.target('p');
    await publishRaw(id, v.staging, target, true, 'SINGLE_NODE_WRITER');
    const grown = { required_bytes: String(128 * MiB), limit_bytes: '0' };
    await ctl('ControllerExpandVolume', { volume_id: id, capacity_range: grown, volume_capability: blockCap() });
    await node('NodeExpandVolume', { volume_id: id, volume_path: target, capacity_range: grown, volume_capability: blockCap() });
    // Once the staging's device alone was refreshed: the reader kept seeing 64 MiB.
    expect(execFileSync('blockdev', ['--getsize64', target], { encoding: 'utf8' }).trim()).toBe(String(128 * MiB));
    await node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: v.staging });
    expect(loopsOf(id)).toEqual([]);
  });
});

describe('a node the volume is attached to read-only', () => {
  // ControllerPublishVolume readonly: the catalog lets other nodes attach a block volume on its word.
  async function attachedReadOnly(id: string, backend: 'block' | 'dir', cap: ReturnType<typeof blockCap>) {
    await ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: csi.flavour.parameters(backend, 64 * MiB), capacity_range: size(64 * MiB) });
    await ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap, readonly: true });
    const staging = stagingPath(csi.s.kubeletDir, id);
    mkdirSync(staging, { recursive: true });
    await node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap });
    return staging;
  }

  it('a raw publish asking for read-write gets the read-only device (once the writable one)', async () => {
    const id = 'att-ro-raw';
    const staging = await attachedReadOnly(id, 'block', blockCap());
    const target = `${csi.s.kubeletDir}/pods/p-${id}/volumeDevices/${id}`;
    await publishRaw(id, staging, target, false, 'SINGLE_NODE_WRITER');
    expect(tryWrite(target, 'x')).not.toBe('written');
    // A repeat asking the same answers the same.
    await publishRaw(id, staging, target, false, 'SINGLE_NODE_WRITER');
    await node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    expect(loopsOf(id)).toEqual([]);
  });

  it('a filesystem publish asking for read-write is mounted read-only (once writable)', async () => {
    const id = 'att-ro-dir';
    const staging = await attachedReadOnly(id, 'dir', mountCap());
    const target = `${csi.s.kubeletDir}/pods/p-${id}/volumes/kubernetes.io~csi/${id}/mount`;
    mkdirSync(dirname(target), { recursive: true });
    const req = { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: mountCap(), readonly: false };
    await node('NodePublishVolume', req);
    expect(() => writeFileSync(`${target}/f`, 'x')).toThrow(/EROFS/);
    await node('NodePublishVolume', req);
    await node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
  });
});
