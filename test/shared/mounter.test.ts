import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Mounter } from '../../shared/mounter.js';
import { isReadOnly, mountAt } from '../../shared/mountinfo.js';
import { setNativeMountPath } from '../../shared/native-mount.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';
import { expectRejects } from './expect-error.js';

// The bind of shared/mounter.ts: made onto the opened target, its flags applied by a remount of the
// new mount. Real mounts under a scratch dir, released by cleanup whatever happens.
let s: Scratch;
let source: string;
let target: string;
beforeEach(() => {
  s = createScratch('node-a');
  source = join(s.root, 'source');
  target = join(s.kubeletDir, 'pods', 'uid-1', 'target');
  mkdirSync(source);
  mkdirSync(target, { recursive: true });
  writeFileSync(join(source, 'f'), 'x');
});
afterEach(() => s.cleanup());

const mounter = new Mounter(10_000);

describe('Mounter.bind', () => {
  it('a read-only bind is read-only in the kernel', async () => {
    await mounter.bind(source, { path: target, within: s.kubeletDir }, true, ['nosuid']);
    const entry = mountAt(target);
    expect(entry && isReadOnly(entry)).toBe(true);
    expect(entry?.mountOptions).toContain('nosuid');
  });

  /** A mount(8) that refuses remounts and passes every other call to the real one, first on PATH while `fn` runs. */
  const withRemountRefused = async (fn: () => Promise<unknown>) => {
    // The kernel accepts nearly anything on a bind remount, so the failure is injected.
    const bin = join(s.root, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'mount'), '#!/bin/sh\ncase "$*" in *remount*) echo "remount refused" >&2; exit 32;; esac\nexec /usr/bin/mount "$@"\n', { mode: 0o755 });
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path ?? ''}`;
    try {
      await fn();
    } finally {
      process.env.PATH = path;
    }
  };

  it('a bind whose flags cannot be applied is undone, not left mounted without them (mount(8) alone)', async () => {
    setNativeMountPath(null);
    try {
      await withRemountRefused(() => expectRejects(mounter.bind(source, { path: target, within: s.kubeletDir }, true), 'Internal', 'remount refused'));
    } finally {
      setNativeMountPath(undefined);
    }
    expect(mountAt(target)).toBeUndefined();
  });

  it('a flag the system call path does not take goes to mount(8), and its failure undoes the bind made natively', async () => {
    // nosymfollow is not among the flags shared/mounter.ts remountFlags applies itself.
    await withRemountRefused(() => expectRejects(mounter.bind(source, { path: target, within: s.kubeletDir }, true, ['nosymfollow']), 'Internal', 'remount refused'));
    expect(mountAt(target)).toBeUndefined();
  });

  it('a read-only bind through mount(8) keeps the flags the filesystem under its source has', async () => {
    // mount(8) given /proc/self/fd/3 cannot look the new mount up: the remount must name them itself.
    const fs = join(s.root, 'hardened');
    mkdirSync(fs);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,nosuid,nodev,noexec', 'tmpfs', fs]);
    mkdirSync(join(fs, 'src'));
    setNativeMountPath(null);
    try {
      await mounter.bind(join(fs, 'src'), { path: target, within: s.kubeletDir }, true);
    } finally {
      setNativeMountPath(undefined);
    }
    expect(mountAt(target)?.mountOptions).toEqual(expect.arrayContaining(['ro', 'nosuid', 'nodev', 'noexec']));
  });

  it('refuses a target outside its root, and a target that is a symlink', async () => {
    await expectRejects(mounter.bind(source, { path: source, within: s.kubeletDir }, false), 'InvalidArgument', 'outside');
    expect(mountAt(source)).toBeUndefined();
    const link = join(s.kubeletDir, 'pods', 'uid-1', 'link');
    symlinkSync(target, link);
    await expectRejects(mounter.bind(source, { path: link, within: s.kubeletDir }, false), 'InvalidArgument', `mount point ${link} is a symbolic link`);
    expect(mountAt(target)).toBeUndefined();
  });
});
