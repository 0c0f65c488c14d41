import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Mounter } from '../../shared/mounter.js';
import { type LoopAttached, parseAddon, setNativeMountPath } from '../../shared/native-mount.js';
import { blockAttribute, createScratch, loopAttribute, loopsLeftUnder, loopsUnder, type Scratch } from '../helpers/scratch.js';
import { addonExports, builtAddon } from './built-addon.js';
import { measure } from '../perf/in-process.js';

/**
 * The addon's loop devices (native/loop.c loopAttach, loopDetach): a free device bound to an image
 * file as losetup --find binds it, and let go as losetup --detach lets it go, with no process. Real
 * devices on images under a scratch dir, detached by its cleanup whatever happens. loopRefresh is
 * LOOP_SET_CAPACITY, as losetup --set-capacity.
 */
let s: Scratch;
let image: string;
beforeEach(() => {
  s = createScratch('node-a');
  image = join(s.root, 'image.img');
  writeFileSync(image, '');
  execFileSync('truncate', ['-s', '8M', image]);
});
afterEach(() => {
  setNativeMountPath(undefined);
  s.cleanup();
});

const loaded = () => builtAddon('loopAttach', 'loopDetach', 'loopRefresh');
const sectors = (device: string) => Number(blockAttribute(device, 'size'));

describe('the addon binds loop devices', () => {
  it('binds a free device to the image, flagged to be let go at its last close when asked, and the kernel does', async () => {
    const attached = loaded().loopAttach(image, true);
    if (typeof attached === 'number') throw new Error(`loopAttach failed: errno ${attached}`);
    try {
      expect(attached.device).toMatch(/^\/dev\/loop\d+$/);
      expect(loopAttribute(attached.device, 'backing_file')).toBe(image);
      expect(loopAttribute(attached.device, 'autoclear')).toBe('1');
      expect(loopsUnder(s.root)).toEqual([attached.device]);
    } finally {
      // Nothing else holds it: closing the descriptor the call left open is its last close. Closed
      // whatever the checks found, or the device would stay bound until this test process ends.
      attached.close();
    }
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });

  it('without autoclear, keeps the device bound until loopDetach, which then answers ENXIO; a missing image is ENOENT', () => {
    const { loopAttach, loopDetach } = loaded();
    const attached = loopAttach(image, false);
    if (typeof attached === 'number') throw new Error(`loopAttach failed: errno ${attached}`);
    attached.close();
    expect(loopAttribute(attached.device, 'autoclear')).toBe('0');
    expect(loopsUnder(s.root)).toEqual([attached.device]);
    expect(loopDetach(attached.device)).toBe(0);
    expect(loopsUnder(s.root)).toEqual([]);
    expect(loopDetach(attached.device)).toBe(6); // ENXIO: bound to nothing
    expect(loopAttach(join(s.root, 'missing.img'), false)).toBe(2); // ENOENT
    expect(loopDetach(image)).toBe(25); // ENOTTY: no loop device
  });

  it('makes a bound device take the new size of its grown file with loopRefresh; a device bound to nothing is ENXIO', () => {
    const { loopAttach, loopDetach, loopRefresh } = loaded();
    const attached = loopAttach(image, false);
    if (typeof attached === 'number') throw new Error(`loopAttach failed: errno ${attached}`);
    attached.close();
    expect(sectors(attached.device)).toBe(16384); // 8 MiB
    execFileSync('truncate', ['-s', '12M', image]);
    expect(sectors(attached.device)).toBe(16384);
    expect(loopRefresh(attached.device)).toBe(0);
    expect(sectors(attached.device)).toBe(24576);
    expect(loopDetach(attached.device)).toBe(0);
    expect(loopRefresh(attached.device)).toBe(6); // ENXIO
  });

  it('binds a device that refuses writes when asked read-only; a third argument that is no boolean is EINVAL', () => {
    const { loopAttach } = loaded();
    const attached = loopAttach(image, false, true);
    if (typeof attached === 'number') throw new Error(`loopAttach failed: errno ${attached}`);
    attached.close();
    expect(blockAttribute(attached.device, 'ro')).toBe('1');
    expect(() => execFileSync('dd', ['if=/dev/zero', `of=${attached.device}`, 'bs=512', 'count=1', 'oflag=direct'], { stdio: 'pipe' })).toThrow();
    const writable = loopAttach(image, false);
    if (typeof writable === 'number') throw new Error(`loopAttach failed: errno ${writable}`);
    writable.close();
    expect(blockAttribute(writable.device, 'ro')).toBe('0');
    // The addon itself, not parseAddon's checked wrapper: what an unchecked caller would get.
    const raw = createRequire(import.meta.url)('../../build/Release/twinvol_mount.node') as { loopAttach: (...args: unknown[]) => unknown };
    expect(raw.loopAttach(image, false, 'yes')).toBe(-22);
    expect(raw.loopAttach(image, false, true, 1)).toBe(-22);
    expect(raw.loopAttach(image)).toBe(-22);
  });

  it('gives devices as fast as they are asked for: sixteen at once are sixteen devices', () => {
    const { loopAttach } = loaded();
    const held: LoopAttached[] = [];
    try {
      for (let i = 0; i < 16; i++) {
        const a = loopAttach(image, true);
        if (typeof a === 'number') throw new Error(`loopAttach failed: errno ${a}`);
        held.push(a);
      }
      const devices = held.map((a) => a.device);
      expect(new Set(devices).size).toBe(16);
      expect(loopsUnder(s.root).sort()).toEqual([...devices].sort());
    } finally {
      for (const a of held) a.close();
    }
  });

  it('parses the answers: the calls optional, a device and a descriptor or an errno, anything else -1 with the descriptor closed', () => {
    const old = parseAddon(addonExports());
    expect(old?.loopAttach).toBeUndefined();
    expect(old?.loopDetach).toBeUndefined();
    const closed: unknown[] = [];
    const withAnswer = (answer: unknown, closeFd: unknown = (fd: unknown) => closed.push(fd)) =>
      parseAddon(addonExports({ loopAttach: () => answer, loopDetach: () => answer, closeFd }));
    // Without closeFd, a descriptor could not be let go: no loopAttach.
    expect(withAnswer(-16, null)?.loopAttach).toBeUndefined();
    const attached = withAnswer({ device: '/dev/loop7', fd: 3 })?.loopAttach?.('/i', true);
    expect(attached).toEqual({ device: '/dev/loop7', close: expect.any(Function) });
    if (typeof attached === 'object') {
      attached.close();
      attached.close();
    }
    // Closed once, however often close is called: the number may belong to another file by then.
    expect(closed).toEqual([3]);
    const answers = [-16, { device: '/dev/sda', fd: 4 }, { device: '/dev/loop7', fd: -1 }, { device: '/dev/loop7' }, null, '3'];
    expect(answers.map((a) => withAnswer(a)?.loopAttach?.('/i', true))).toEqual([16, -1, -1, -1, -1, -1]);
    // The descriptor of a device not named as a loop device is closed, not leaked.
    expect(closed).toEqual([3, 4]);
    expect([0, 6, -6, 'x'].map((a) => withAnswer(a)?.loopDetach?.('/dev/loop7'))).toEqual([0, 6, -1, -1]);
    // Read-only alone passes a third argument: an addon built before it takes exactly two, and refuses three.
    const counts: number[] = [];
    const counting = parseAddon(addonExports({ loopAttach: (...args: unknown[]) => (counts.push(args.length), -22), closeFd: () => 0 }));
    counting?.loopAttach?.('/i', true);
    counting?.loopAttach?.('/i', false, false);
    counting?.loopAttach?.('/i', false, true);
    expect(counts).toEqual([2, 2, 3]);
    expect(parseAddon(addonExports({ loopRefresh: () => 6 }))?.loopRefresh?.('/dev/loop7')).toBe(6);
    expect(old?.loopRefresh).toBeUndefined();
  });
});

describe('the mounter binds and lets go of loop devices', () => {
  const mounter = new Mounter(10_000);

  it('through the addon (bind, refresh, detach), recorded as ioctls, with no process', async () => {
    const attached = await measure(() => mounter.loopAttach(image));
    expect(attached.work).toMatchObject({ spawns: [], systemCalls: ['ioctl'] });
    expect(loopAttribute(attached.result, 'autoclear')).toBe('0');
    execFileSync('truncate', ['-s', '12M', image]);
    const refreshed = await measure(() => mounter.loopRefresh(attached.result));
    expect(refreshed.work).toMatchObject({ spawns: [], systemCalls: ['ioctl'] });
    expect(sectors(attached.result)).toBe(24576);
    const detached = await measure(() => mounter.loopDetach(attached.result));
    expect(detached.work).toMatchObject({ spawns: [], systemCalls: ['ioctl'] });
    expect(loopsUnder(s.root)).toEqual([]);
  });

  it('through losetup where there is no addon', async () => {
    setNativeMountPath(null);
    const attached = await measure(() => mounter.loopAttach(image));
    expect(attached.work).toMatchObject({ spawns: ['losetup'], systemCalls: [] });
    const refreshed = await measure(() => mounter.loopRefresh(attached.result));
    expect(refreshed.work).toMatchObject({ spawns: ['losetup'], systemCalls: [] });
    const detached = await measure(() => mounter.loopDetach(attached.result));
    expect(detached.work).toMatchObject({ spawns: ['losetup'], systemCalls: [] });
    expect(loopsUnder(s.root)).toEqual([]);
  });

  it('binds a read-only device through the addon, and through losetup where there is none', async () => {
    const native = await measure(() => mounter.loopAttach(image, { readOnly: true }));
    expect(native.work).toMatchObject({ spawns: [], systemCalls: ['ioctl'] });
    expect(blockAttribute(native.result, 'ro')).toBe('1');
    setNativeMountPath(null);
    const tool = await measure(() => mounter.loopAttach(image, { readOnly: true }));
    expect(tool.work).toMatchObject({ spawns: ['losetup'], systemCalls: [] });
    expect(blockAttribute(tool.result, 'ro')).toBe('1');
    for (const device of [native.result, tool.result]) await mounter.loopDetach(device);
    expect(loopsUnder(s.root)).toEqual([]);
  });

  it('binds through losetup when the addon cannot, whose error is the one given', async () => {
    // A directory where the image should be: the addon's open answers EISDIR, losetup says its own.
    const failed = await measure(() => mounter.loopAttach(s.root).then(() => 'bound', (err: unknown) => String(err)));
    expect(failed.work).toMatchObject({ spawns: ['losetup'], systemCalls: ['ioctl:EISDIR'] });
    expect(failed.result).toMatch(/losetup/);
    expect(loopsUnder(s.root)).toEqual([]);
  });

  it('lets go through losetup when the addon fails, whose error is the one given', async () => {
    // A detach of a device bound to nothing: the addon answers ENXIO, and losetup says what it is.
    const attached = await mounter.loopAttach(image);
    await mounter.loopDetach(attached);
    const again = measure(() => mounter.loopDetach(attached));
    await expect(again).rejects.toThrow(/losetup/);
  });
});
