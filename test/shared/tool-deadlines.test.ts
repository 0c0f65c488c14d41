import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Mounter } from '../../shared/mounter.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';
import { expectRejects } from './expect-error.js';

// A tool that walks a volume's data (fsck, mkfs, resize2fs, cp) takes longer the larger the volume:
// under the two-minute deadline of every other tool, the fsck of a large filesystem was killed at
// each try, and the stage could never succeed (kubelet gives its own fsck no deadline at all). Such a
// tool has a deadline of its own (config dataCommandTimeoutMs). A slow tool cannot be had for real on
// demand, so a stand-in that sleeps comes first on PATH; it runs through the real runner.
let s: Scratch;
let path: string | undefined;
beforeEach(() => {
  s = createScratch('node-a');
  const bin = join(s.root, 'bin');
  mkdirSync(bin);
  // Both sleep past the one-second deadline of ordinary tools; fsck then answers "no errors".
  for (const tool of ['fsck', 'blkid']) writeFileSync(join(bin, tool), '#!/bin/sh\nsleep 1.6\nexit 0\n', { mode: 0o755 });
  path = process.env.PATH;
  process.env.PATH = `${bin}:${path ?? ''}`;
});
afterEach(() => {
  process.env.PATH = path;
  s.cleanup();
});

describe('the deadline of a tool that walks the data', () => {
  it('is the data deadline, not the deadline of every other tool', async () => {
    const mounter = new Mounter(1000, 30_000);
    await expect(mounter.fsck('/dev/twinvol-test-none')).resolves.toEqual({ exitCode: 0, detail: '' });
    // A tool that does not walk the data keeps the short one.
    await expectRejects(mounter.probe('/dev/twinvol-test-none'), 'Internal', 'blkid did not finish within 1000 ms');
  });

  it('is the ordinary deadline when none is given', async () => {
    await expectRejects(new Mounter(1000).fsck('/dev/twinvol-test-none'), 'Internal', 'fsck did not finish within 1000 ms');
  });
});
