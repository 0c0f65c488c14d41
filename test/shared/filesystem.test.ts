import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { COARSE_SETTLED_MS, FINE_SETTLED_MS, hasSettled, isLocalFilesystem, isVolatileFilesystem, nsToMs, settleWindowMs } from '../../shared/store/filesystem.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

/** When a listing of a directory may be kept (shared/store/filesystem.ts), and what the kernel says of a filesystem. */
const WHOLE = 1_795_789_055_000; // a time in ms with no fraction of a second
const FRACTION = 1_795_789_055_123.456;

describe('the settle window', () => {
  it('is short only on a local filesystem whose times carry a fraction of a second', () => {
    expect(settleWindowMs(true, FRACTION, FRACTION)).toBe(FINE_SETTLED_MS);
    expect(settleWindowMs(false, FRACTION, FRACTION)).toBe(COARSE_SETTLED_MS);
    expect(settleWindowMs(true, WHOLE, FRACTION)).toBe(COARSE_SETTLED_MS);
    expect(settleWindowMs(true, FRACTION, WHOLE)).toBe(COARSE_SETTLED_MS);
  });

  it('asks both times to be older than the window', () => {
    expect(hasSettled(true, FRACTION, FRACTION, FRACTION + FINE_SETTLED_MS + 1)).toBe(true);
    expect(hasSettled(true, FRACTION, FRACTION, FRACTION + FINE_SETTLED_MS)).toBe(false);
    expect(hasSettled(true, FRACTION, FRACTION + 50, FRACTION + FINE_SETTLED_MS + 1)).toBe(false);
    expect(hasSettled(false, FRACTION, FRACTION, FRACTION + FINE_SETTLED_MS + 1)).toBe(false);
    expect(hasSettled(false, FRACTION, FRACTION, FRACTION + COARSE_SETTLED_MS + 1)).toBe(true);
    // A time ahead of this host's clock (another host's, or a clock stepped back) is never settled.
    expect(hasSettled(true, FRACTION + 60_000, FRACTION, FRACTION + 1_000)).toBe(false);
  });

  it('reads a bigint stat\'s nanoseconds without losing the fraction, or inventing one', () => {
    expect(nsToMs(1_795_789_055_000_000_000n)).toBe(WHOLE);
    expect(nsToMs(1_795_789_055_123_456_789n)).toBeCloseTo(1_795_789_055_123.456789, 3);
    expect(settleWindowMs(true, nsToMs(1_795_789_055_000_000_000n), nsToMs(1_795_789_055_000_000_000n))).toBe(COARSE_SETTLED_MS);
    expect(settleWindowMs(true, nsToMs(1_795_789_055_000_001_000n), nsToMs(1_795_789_055_004_000_000n))).toBe(FINE_SETTLED_MS);
    // A double holds today's milliseconds to about a quarter of a microsecond: a time a few nanoseconds
    // past a whole second reads as whole, which only asks for the long window.
    expect(settleWindowMs(true, nsToMs(1_795_789_055_000_000_001n), nsToMs(1_795_789_055_004_000_000n))).toBe(COARSE_SETTLED_MS);
  });
});

describe('isLocalFilesystem and isVolatileFilesystem', () => {
  let s: Scratch;
  beforeEach(() => {
    s = createScratch();
  });
  afterEach(() => s.cleanup());

  it('knows ext4 and tmpfs, refuses what it does not know, and waits for a path not made yet', async () => {
    // The scratch lies on this machine's root filesystem, ext4; its state dir is a tmpfs.
    expect(await isLocalFilesystem(s.root)).toBe(true);
    const tmpfs = join(s.root, 'tmpfs');
    mkdirSync(tmpfs);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', tmpfs]);
    expect(await isLocalFilesystem(tmpfs)).toBe(true);
    // procfs is no place for a data root: what is not known to keep this host's times is not local.
    expect(await isLocalFilesystem('/proc')).toBe(false);
    expect(await isLocalFilesystem(join(s.root, 'not-yet'))).toBeUndefined();
  });

  it('isVolatileFilesystem: a tmpfs is, the disk and procfs are not, a path not made yet is asked again', async () => {
    const tmpfs = join(s.root, 'tmpfs');
    mkdirSync(tmpfs);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', tmpfs]);
    expect(await isVolatileFilesystem(tmpfs)).toBe(true);
    expect(await isVolatileFilesystem(s.root)).toBe(false);
    expect(await isVolatileFilesystem('/proc')).toBe(false);
    expect(await isVolatileFilesystem(join(s.root, 'not-yet'))).toBeUndefined();
  });
});
