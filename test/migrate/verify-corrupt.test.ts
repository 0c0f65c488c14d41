import { execFileSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runAdmin } from '../helpers/flex-runner.js';
import { leftovers, parseReport, useVerifyWorld, verify, writeRichTree, writeUnderFlex } from './verify-world.js';

/**
 * A verify that cannot fail proves nothing: here one byte of the volume changes between two halves
 * (TWINVOL_VERIFY_HOOK, run by flex/migrate/verify.ts after a half is torn down, nothing mounted), and
 * the verify must say MISMATCH, name the file, exit 1, and still leave nothing behind.
 */
const world = useVerifyWorld();

afterEach(async () => {
  expect(await leftovers(world())).toEqual([]);
});

/** A hook that runs `body` (bash) when verify reaches `phase`; $2 is the volume id. */
function hook(name: string, phase: 'flex' | 'csi', body: string): string {
  const path = join(world().root, `${name}.sh`);
  writeFileSync(path, `#!/bin/bash\nset -eu\n[ "$1" = ${phase} ] || exit 0\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

describe('migrate verify: a changed byte is caught', () => {
  it('a dir volume changed between the FlexVolume and the CSI half: MISMATCH naming the file', { timeout: 300_000 }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'bad-dir', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    await writeUnderFlex(s, 'bad-dir', (dir) => writeRichTree(dir, 'x'));
    const blob = join(s.dataRoot, 'volumes/bad-dir/data/app/blob.bin');
    const flip = hook('flip-dir', 'flex', `printf Z | dd of=${blob} bs=1 seek=4242 conv=notrunc status=none`);
    const r = await verify(s, ['bad-dir', '--json'], { TWINVOL_VERIFY_HOOK: flip });
    expect(r.exitCode).toBe(1);
    const report = parseReport(r);
    expect(report.verdict).toBe('mismatch');
    expect(report.differences.csi).toEqual([expect.stringMatching(/^app\/blob\.bin: content [0-9a-f]{12} -> [0-9a-f]{12}$/)]);
    // CSI and the rollback both read the changed file: the same as each other.
    expect(report.differences.rollback).toEqual([]);
  });

  it('a FIFO turned into a device node, a device node into another device: MISMATCH naming each', { timeout: 300_000 }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'bad-node', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const data = join(s.dataRoot, 'volumes/bad-node/data');
    execFileSync('mkfifo', ['-m', '644', join(data, 'fifo1')]);
    execFileSync('mknod', ['-m', '644', join(data, 'null1'), 'c', '1', '3']);
    // Same names, same mode bits, same owner: only the file type and the device numbers change.
    const swap = hook('swap-nodes', 'flex', `rm -f ${data}/fifo1 ${data}/null1\nmknod -m 644 ${data}/fifo1 c 1 3\nmknod -m 644 ${data}/null1 c 1 7`);
    const r = await verify(s, ['bad-node', '--json'], { TWINVOL_VERIFY_HOOK: swap });
    expect(r.exitCode).toBe(1);
    const report = parseReport(r);
    expect(report.verdict).toBe('mismatch');
    expect(report.differences.csi).toEqual(['fifo1: type "fifo" -> "char", rdev "" -> "1:3"', 'null1: rdev "1:3" -> "1:7"']);
    expect(report.differences.rollback).toEqual([]);
  });

  it('a block volume changed between the CSI half and the rollback: MISMATCH in the tree and the device bytes', { timeout: 300_000 }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'bad-blk', '--size', '32Mi'])).exitCode).toBe(0);
    await writeUnderFlex(s, 'bad-blk', (dir) => writeRichTree(dir, 'y'));
    const image = join(s.dataRoot, 'volumes/bad-blk/image.img');
    const at = join(s.root, 'hook-mnt');
    // Mounted by hand (a loop device of its own, autocleared on umount), one byte changed, unmounted.
    const flip = hook('flip-blk', 'csi', `mkdir -p ${at}\nmount -o loop ${image} ${at}\nprintf Z | dd of=${at}/empty bs=1 seek=0 conv=notrunc status=none\numount ${at}`);
    const r = await verify(s, ['bad-blk'], { TWINVOL_VERIFY_HOOK: flip });
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/verdict: MISMATCH: volume bad-blk does not read the same/);
    expect(r.stdout).toMatch(/differs, CSI -> FlexVolume \(rollback\): empty: size 0 -> 1, content e3b0c44298fc -> [0-9a-f]{12}/);
    expect(r.stdout).toMatch(/differs, CSI -> FlexVolume \(rollback\): device bytes differ/);
    expect(r.stdout).not.toMatch(/differs, FlexVolume -> CSI/);
  });
});
