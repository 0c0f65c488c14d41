import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Mounter } from '../../shared/mounter.js';
import { mountAt } from '../../shared/mountinfo.js';
import { observeSystemCalls, parseAddon, type SystemCallRecord } from '../../shared/native-mount.js';
import { createScratch, loopsLeftUnder, type Scratch } from '../helpers/scratch.js';
import { addonExports, builtAddon } from './built-addon.js';

/**
 * The addon's mount and unmount made on libuv's threadpool (native/mount.c mountAsync, umountAsync),
 * which the mounter uses for a filesystem's mount and for every unmount outside a FlexVolume call: an
 * unmount that flushes written data, or a mount that replays a journal, must not hold the CSI
 * server's service thread, and every call waiting behind it. Real mounts under a scratch dir.
 */
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const asyncCalls = () => builtAddon('mountAsync', 'umountAsync');

describe('mount and unmount on the threadpool', () => {
  it('mount and unmount a tmpfs, answering a promise of 0 or the errno', async () => {
    const native = asyncCalls();
    const dir = join(s.root, 'fs');
    mkdirSync(dir);
    const mounted = native.mountAsync('tmpfs', dir, 'tmpfs', native.MS_NOSUID, 'size=1m');
    expect(mounted).toBeInstanceOf(Promise);
    expect(await mounted).toBe(0);
    expect(mountAt(dir)).toMatchObject({ fsType: 'tmpfs', mountOptions: expect.arrayContaining(['nosuid']) });
    expect(await native.umountAsync(dir, native.UMOUNT_NOFOLLOW)).toBe(0);
    expect(mountAt(dir)).toBeUndefined();
    expect(await native.umountAsync(dir, 0)).toBe(22); // EINVAL: not a mount point
    expect(await native.mountAsync('tmpfs', join(s.root, 'missing'), 'tmpfs', 0, null)).toBe(2); // ENOENT
  });

  it('are optional, and their answers are checked: bad arguments an errno at once, anything but an errno -1', async () => {
    const native = asyncCalls();
    // Bad arguments (a NUL inside a path) never reach the threadpool.
    expect(await native.umountAsync('/tmp/a\0b', 0)).toBe(22);
    expect(parseAddon(addonExports())?.mountAsync).toBeUndefined();
    expect(parseAddon(addonExports())?.umountAsync).toBeUndefined();
    const answering = (answer: unknown) => parseAddon(addonExports({ mountAsync: () => answer, umountAsync: () => answer }));
    const answers = [Promise.resolve(0), Promise.resolve(16), 5, Promise.resolve('0'), null, Promise.resolve(-3)];
    expect(await Promise.all(answers.map((a) => answering(a)?.umountAsync?.('/x', 0)))).toEqual([0, 16, 5, -1, -1, -1]);
    expect(await answering(Promise.resolve(0))?.mountAsync?.(null, '/x', null, 0, null)).toBe(0);
  });
});

describe('the mounter', () => {
  it('unmounts a filesystem that flushes written data on the threadpool: this thread runs meanwhile', async () => {
    // 64 MiB written to an ext4 on a loop device: its unmount writes them out (about 100 ms here).
    const image = join(s.root, 'image.img');
    writeFileSync(image, '');
    execFileSync('truncate', ['-s', '160M', image]);
    execFileSync('mkfs.ext4', ['-q', '-F', image]);
    const dir = join(s.root, 'mnt');
    mkdirSync(dir);
    execFileSync('mount', ['-o', 'loop', image, dir]);
    execFileSync('dd', ['if=/dev/zero', `of=${join(dir, 'data')}`, 'bs=1M', 'count=64', 'status=none']);

    // Ticks of a timer, and the unmount's own record: when it ended and how long the call took.
    const ticks: number[] = [];
    const timer = setInterval(() => ticks.push(performance.now()), 1);
    const calls: [SystemCallRecord, number][] = [];
    const stop = observeSystemCalls((r) => calls.push([r, performance.now()]));
    try {
      await new Mounter(60_000).unmountAll(dir);
    } finally {
      stop();
      clearInterval(timer);
    }
    expect(mountAt(dir)).toBeUndefined();
    const [[call, ended] = []] = calls;
    expect(call).toMatchObject({ call: 'umount2', target: dir });
    if (!call || ended === undefined) throw new Error('no umount2 recorded');
    // The timer fired while the call was in progress: the thread was not held by it.
    const during = ticks.filter((t) => t > ended - call.durationMs && t < ended);
    expect(during.length, `${call.durationMs.toFixed(1)} ms unmount`).toBeGreaterThan(0);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });
});
