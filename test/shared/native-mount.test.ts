import { execFileSync } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Mounter } from '../../shared/mounter.js';
import { remountFlags, remountOptions } from '../../shared/mount-options.js';
import { mountAt } from '../../shared/mountinfo.js';
import { callNatively, NATIVE_MOUNT_FILE, type NativeMount, nativeMount, nativeMountBeside, observeSystemCalls, parseAddon, type SystemCallRecord, setNativeMountPath, systemCallLog } from '../../shared/native-mount.js';
import { addonExports, builtAddon } from './built-addon.js';
import { expectThrows } from './expect-error.js';
import { expectSuccess, mountOptions, podNamed, runCli, runFlex } from '../helpers/flex-runner.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';
import { measure } from '../perf/in-process.js';

/**
 * The mount addon (native/mount.c, shared/native-mount.ts): binds and unmounts as system calls, the
 * same mounts mount(8) makes, and mount(8) wherever the addon is not there. Real mounts under a
 * scratch dir, released by cleanup whatever happens.
 */
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => {
  setNativeMountPath(undefined);
  s.cleanup();
});

const mounter = new Mounter(10_000);
const loaded = (): NativeMount => builtAddon();

/**
 * `body` run as with an addon built before bindWithFlags (a bind, then a remount for its flags): an
 * older install's addon cannot be built here, so the loaded one lends itself without the call.
 */
async function withoutBindWithFlags<T>(body: () => Promise<T>): Promise<T> {
  const native = builtAddon('bindWithFlags');
  const saved = native.bindWithFlags;
  Reflect.deleteProperty(native, 'bindWithFlags');
  try {
    return await body();
  } finally {
    native.bindWithFlags = saved;
  }
}

/** A tmpfs mounted with `options`, holding a source dir, and a target dir under the kubelet dir. */
function sourceOn(name: string, options: string): { source: string; target: string } {
  const fs = join(s.root, name);
  mkdirSync(fs);
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=1m,${options}`, 'tmpfs', fs]);
  const source = join(fs, 'src');
  mkdirSync(source);
  writeFileSync(join(source, 'f'), name);
  const target = join(s.kubeletDir, 'pods', name, 'target');
  mkdirSync(target, { recursive: true });
  return { source, target };
}

describe('the mount addon', () => {
  it('is built by npm ci, loads here, and is what the build puts beside both executables', () => {
    expect(loaded().MS_BIND).toBeGreaterThan(0);
    // test/global-setup.ts builds dist/ before the suite.
    for (const dir of ['dist/csi', 'dist/flex', 'dist/sea']) expect(existsSync(join(dir, NATIVE_MOUNT_FILE)), dir).toBe(true);
  });

  it.each([
    ['a source on nosuid,nodev', 'nosuid,nodev', false, []],
    ['read-only, on nosuid,nodev', 'nosuid,nodev', true, []],
    ['read-only with noexec, on strictatime', 'strictatime', true, ['noexec']],
    ['read-only, on noatime,noexec', 'noatime,noexec', true, ['nosuid']],
    ['read-write with nodev, on relatime', 'relatime', false, ['nodev']],
  ] as const)('binds as mount(8) does, keeping the flags the filesystem under the source has: %s', async (_, fsOptions, readonly, extra) => {
    const native = sourceOn('native', fsOptions);
    const older = sourceOn('older', fsOptions);
    const moved = sourceOn('moved', fsOptions);
    const movedByTool = sourceOn('moved-by-tool', fsOptions);
    const tool = sourceOn('tool', fsOptions);
    const flagged = readonly || extra.length > 0;
    const bound = await measure(() => mounter.bind(native.source, { path: native.target, within: s.kubeletDir }, readonly, extra));
    expect(bound.work.spawns).toEqual([]);
    // With options, one step (native/bind.c); an older addon binds, then remounts.
    expect(bound.work.systemCalls).toEqual(flagged ? ['move_mount'] : ['mount']);
    const remounted = await withoutBindWithFlags(() => measure(() => mounter.bind(older.source, { path: older.target, within: s.kubeletDir }, readonly, extra)));
    expect(remounted.work.systemCalls).toEqual(flagged ? ['mount', 'mount'] : ['mount']);
    // Given a state dir, an older addon binds and remounts on a scratch mount point, then moves the
    // bind onto the target (shared/bind-by-move.ts); the first such bind makes the scratch parent a
    // private mount of itself (a bind and a make-private), once.
    const scratchMounter = new Mounter(10_000, 10_000, s.stateDir);
    const byMove = await withoutBindWithFlags(() => measure(() => scratchMounter.bind(moved.source, { path: moved.target, within: s.kubeletDir }, readonly, extra)));
    expect(byMove.work.spawns).toEqual([]);
    expect(byMove.work.systemCalls).toEqual(flagged ? ['mount', 'mount', 'mount', 'mount', 'mount'] : ['mount']);
    setNativeMountPath(null);
    const movedBySpawns = await measure(() => scratchMounter.bind(movedByTool.source, { path: movedByTool.target, within: s.kubeletDir }, readonly, extra));
    expect(movedBySpawns.work.spawns).toEqual(flagged ? ['mount', 'mount', 'mount'] : ['mount']);
    const spawned = await measure(() => mounter.bind(tool.source, { path: tool.target, within: s.kubeletDir }, readonly, extra));
    expect(spawned.work.spawns).toEqual(flagged ? ['mount', 'mount'] : ['mount']);
    const got = mountAt(native.target);
    const want = mountAt(tool.target);
    expect(got?.mountOptions).toEqual(want?.mountOptions);
    for (const other of [older, moved, movedByTool]) expect(mountAt(other.target)?.mountOptions, other.target).toEqual(want?.mountOptions);
    // Nothing is left on the scratch side: each scratch mount point is unmounted and removed.
    const binds = join(s.stateDir, 'binds');
    expect(existsSync(binds) ? readdirSync(binds) : []).toEqual([]);
    // What the filesystem under the source has stays (a read-only publish once dropped nosuid, nodev, noexec).
    for (const o of fsOptions.split(',').filter((o) => o !== 'strictatime')) expect(got?.mountOptions).toContain(o);
    expect(got?.root).toBe('/src');
    expect(got?.fsType).toBe(want?.fsType);
  });

  it('unmounts with no process, and never through a symlink put in the mount point\'s place', async () => {
    const { source, target } = sourceOn('u', 'nosuid');
    await mounter.bind(source, { path: target, within: s.kubeletDir }, false);
    // umount2 with UMOUNT_NOFOLLOW refuses a path whose last part is a symlink, even to a mount point:
    // unmountAll's fast path cannot be walked elsewhere by a link (umount(8) then answers for it).
    const link = join(s.kubeletDir, 'pods', 'u', 'link');
    symlinkSync(target, link);
    expect(loaded().umount(link, loaded().UMOUNT_NOFOLLOW)).not.toBe(0);
    expect(mountAt(target)).toBeDefined();
    const unmounted = await measure(() => mounter.unmountAll(target));
    expect(unmounted.work.spawns).toEqual([]);
    expect(mountAt(target)).toBeUndefined();
  });

  it('records each call as a spawned tool is recorded: the target by its path, mount(8)\'s words, a failure\'s errno by name', async () => {
    const { source, target } = sourceOn('r', 'nosuid');
    const seen: SystemCallRecord[] = [];
    const stop = observeSystemCalls((r) => seen.push(r));
    try {
      await mounter.bind(source, { path: target, within: s.kubeletDir }, true, ['noexec']);
      await mounter.unmountAll(target);
      await withoutBindWithFlags(() => mounter.bind(source, { path: target, within: s.kubeletDir }, true, ['noexec']));
      await mounter.unmountAll(target);
      // Nothing is mounted there any more: the kernel says EINVAL, and the record says so.
      const native = loaded();
      expect(callNatively({ call: 'umount2', target, options: [] }, () => native.umount(target, 0))).toBe(false);
      setNativeMountPath(null);
      await mounter.bind(source, { path: target, within: s.kubeletDir }, false);
      await mounter.unmountAll(target);
    } finally {
      stop();
    }
    expect(seen.map(({ durationMs, ...r }) => (expect(durationMs).toBeGreaterThanOrEqual(0), r))).toEqual([
      { call: 'move_mount', source, target, options: ['bind', 'ro', 'noexec'] },
      { call: 'umount2', target, options: ['nofollow'] },
      { call: 'mount', source, target, options: ['bind'] },
      { call: 'mount', target, options: ['remount', 'bind', 'nosuid', 'relatime', 'ro', 'noexec'] },
      { call: 'umount2', target, options: ['nofollow'] },
      { call: 'umount2', target, options: [], error: 'EINVAL' },
    ]);
    expect(systemCallLog().slice(-6)).toEqual(seen);
  });

  it('tells whether a path is a mount\'s root, without following its last part; cannot say for a path that is not there', () => {
    const { source, target } = sourceOn('root', 'nosuid');
    const native = loaded();
    expect(native.mountRoot(join(s.root, 'root'))).toBe(true);
    expect(native.mountRoot(source)).toBe(false);
    const link = join(s.root, 'link');
    symlinkSync(join(s.root, 'root'), link);
    expect(native.mountRoot(link)).toBe(false);
    expect(native.mountRoot(join(s.root, 'missing'))).toBeUndefined();
    expect(native.mountRoot(target)).toBe(false);
  });

  it('reads an addon\'s exports rather than trusting them: mountRoot is optional, and only 1 or 0 says anything', () => {
    const withRoot = (mountRoot?: (path: string) => unknown) => parseAddon(addonExports(mountRoot ? { mountRoot } : {}));
    // An addon built before mountRoot existed (left beside an older executable) still mounts.
    const old = withRoot();
    expect(old?.mount(null, '/x', null, 0, null)).toBe(0);
    expect(old?.mountRoot('/')).toBeUndefined();
    // A kernel before 5.8 answers -EOPNOTSUPP, a failed statx another negative errno: the table decides.
    expect([1, 0, -95, -2, 2, '1', null].map((answer) => withRoot(() => answer)?.mountRoot('/'))).toEqual([true, false, undefined, undefined, undefined, undefined, undefined]);
    expect(parseAddon(addonExports({ umount: undefined }))).toBeUndefined();
    expect(parseAddon(addonExports({ MS_BIND: '4096' }))).toBeUndefined();
    // MS_MOVE and MS_PRIVATE are optional (an older addon): without them, or unreadable, mount(8) moves.
    expect(parseAddon(addonExports())?.MS_MOVE).toBe(loaded().MS_MOVE);
    for (const MS_MOVE of [undefined, '8192', -1, 0.5]) expect(parseAddon(addonExports({ MS_MOVE }))?.MS_MOVE, String(MS_MOVE)).toBeUndefined();
  });

  it('names the mount on top at a path; topMount is optional, and only two ids and a path say anything', () => {
    const { source } = sourceOn('top', 'nosuid');
    const native = loaded();
    const root = join(s.root, 'top');
    const entry = mountAt(root);
    expect(native.topMount(root)).toEqual({ id: entry?.id, parentId: entry?.parentId, mountPoint: root });
    // Inside the mount, not its root: the answer is the mount the path lies on.
    expect(native.topMount(source)?.mountPoint).toBe(root);
    expect(native.topMount(join(s.root, 'missing'))).toBeUndefined();
    const withTop = (topMount?: (path: string) => unknown) => parseAddon(addonExports(topMount ? { topMount } : {}));
    expect(withTop()?.topMount('/')).toBeUndefined();
    // A kernel before 6.8 answers -EOPNOTSUPP or -ENOSYS, a seccomp filter -EPERM: the table decides.
    const answers = [{ id: 1, parentId: 0, mountPoint: '/' }, -95, -38, -1, null, { id: '1', parentId: 0, mountPoint: '/' }, { id: 1, parentId: -1, mountPoint: '/' }, { id: 1, parentId: 0 }];
    expect(answers.map((answer) => withTop(() => answer)?.topMount('/'))).toEqual([{ id: 1, parentId: 0, mountPoint: '/' }, ...answers.slice(1).map(() => undefined)]);
  });

  it('a path that holds no addon, or another file, means mount(8), not a failure', async () => {
    const { source, target } = sourceOn('m', 'nosuid');
    for (const path of [join(s.root, 'none.node'), join(s.root, 'f'), '/usr/bin/true']) {
      writeFileSync(join(s.root, 'f'), 'not an addon');
      setNativeMountPath(path);
      expect(nativeMount(), path).toBeUndefined();
      const bound = await measure(() => mounter.bind(source, { path: target, within: s.kubeletDir }, true));
      expect(bound.work.spawns).toEqual(['mount', 'mount']);
      await mounter.unmountAll(target);
    }
  });
});

describe('TWINVOL_NATIVE_MOUNT', () => {
  const withEnv = <T>(value: string | undefined, fn: () => T): T => {
    const before = process.env.TWINVOL_NATIVE_MOUNT;
    if (value === undefined) delete process.env.TWINVOL_NATIVE_MOUNT;
    else process.env.TWINVOL_NATIVE_MOUNT = value;
    try {
      return fn();
    } finally {
      if (before === undefined) delete process.env.TWINVOL_NATIVE_MOUNT;
      else process.env.TWINVOL_NATIVE_MOUNT = before;
    }
  };

  it('on, empty or unset: the addon beside the file; off: none; anything else is refused by name', async () => {
    for (const v of [undefined, '', 'on']) expect(withEnv(v, () => nativeMountBeside('/opt/tv/twinvol-csi')), String(v)).toBe(`/opt/tv/${NATIVE_MOUNT_FILE}`);
    expect(withEnv('off', () => nativeMountBeside('/opt/tv/twinvol-csi'))).toBeNull();
    for (const v of ['0', 'OFF', 'no', 'x'.repeat(100)])
      withEnv(v, () => expectThrows(() => nativeMountBeside('/opt/tv/twinvol-csi'), 'InvalidArgument', 'TWINVOL_NATIVE_MOUNT must be on or off'));
  });

  it('the FlexVolume executable looks only when it mounts, and answers a bad value with a Failure, mounting nothing', async () => {
    expect((await runCli(s.env, ['create', 'nm', '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    const target = podVolumeDir(s.kubeletDir, 'uid-n', 'pv-nm');
    const opts = mountOptions('pv-nm', podNamed('uid-n'), { volumeId: 'nm' });
    const bad = { ...s.env, TWINVOL_NATIVE_MOUNT: 'no' };
    expectSuccess(await runFlex(bad, ['getvolumename', opts]));
    const r = await runFlex(bad, ['mount', target, opts]);
    expect(r.exitCode).toBe(1);
    expect(r.reply).toEqual({ status: 'Failure', message: 'TWINVOL_NATIVE_MOUNT must be on or off, not "no"' });
    expect(mountAt(target)).toBeUndefined();
    // With the variable unset the same call mounts, and its unmount leaves nothing.
    expectSuccess(await runFlex(s.env, ['mount', target, opts]));
    expect(mountAt(target)).toBeDefined();
    expectSuccess(await runFlex(s.env, ['unmount', target]));
    expect(mountAt(target)).toBeUndefined();
    // Each call's log line names the system calls it made in place of the tools it no longer spawns.
    const lines = readFileSync(join(s.stateDir, 'log/flex.log'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.slice(-2)).toEqual([
      expect.objectContaining({ call: 'mount', status: 'Success', spawns: [], systemCalls: [expect.stringMatching(/^mount:0:\d+\.\d\dms$/)] }),
      expect.objectContaining({ call: 'unmount', status: 'Success', spawns: [], systemCalls: [expect.stringMatching(/^umount2:0:\d+\.\d\dms$/)] }),
    ]);
  });
});

describe('a read-only bind made in one step (native/bind.c)', () => {
  it('is how a FlexVolume read-only mount is made: there is no writable bind waiting for its remount', async () => {
    expect((await runCli(s.env, ['create', 'ro1', '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    const target = podVolumeDir(s.kubeletDir, 'uid-ro', 'pv-ro1');
    const opts = mountOptions('pv-ro1', podNamed('uid-ro'), { volumeId: 'ro1', 'kubernetes.io/readwrite': 'ro' });
    expectSuccess(await runFlex(s.env, ['mount', target, opts]));
    expect(mountAt(target)?.mountOptions).toContain('ro');
    const [line] = readFileSync(join(s.stateDir, 'log/flex.log'), 'utf8').trimEnd().split('\n').slice(-1).map((l) => JSON.parse(l) as Record<string, unknown>);
    // One call, which mounts nothing until the flags are set: a kill before it leaves nothing, after it the finished mount.
    expect(line).toEqual(expect.objectContaining({ call: 'mount', status: 'Success', spawns: [], systemCalls: [expect.stringMatching(/^move_mount:0:\d+\.\d\dms$/)] }));
    expectSuccess(await runFlex(s.env, ['unmount', target]));
    expect(mountAt(target)).toBeUndefined();
  });

  it('is left for a bind and remount once the kernel says it has no such calls (before 5.12: ENOSYS)', async () => {
    const native = builtAddon('bindWithFlags');
    const saved = native.bindWithFlags;
    let tries = 0;
    // An older kernel cannot be had here: the addon's call answers as it would there.
    native.bindWithFlags = () => (tries++, osConstants.errno.ENOSYS);
    // As the core makes it (shared/core/core.ts): on a scratch mount point under the state dir, then
    // moved. The first also makes the scratch parent a private mount of itself.
    const scratchMounter = new Mounter(10_000, 10_000, s.stateDir);
    try {
      for (const name of ['first', 'second']) {
        const { source, target } = sourceOn(name, 'nosuid');
        const bound = await measure(() => scratchMounter.bind(source, { path: target, within: s.kubeletDir }, true));
        const [bind, remount, move] = ['bind', 'remount', 'move'].map((o) => expect.objectContaining({ options: expect.arrayContaining([o]) }));
        expect(bound.work.systemCalls, name).toEqual(name === 'first' ? ['move_mount:ENOSYS', 'mount', 'mount', 'mount', 'mount', 'mount'] : ['mount', 'mount', 'mount']);
        expect(systemCallLog().slice(-3), name).toEqual([bind, remount, move]);
        // One table read for the scratch parent's propagation, one for the flags the remount repeats.
        expect(bound.work.mountTableReads, name).toBe(2);
        expect(mountAt(target)?.mountOptions).toContain('ro');
      }
      expect(tries).toBe(1);
    } finally {
      native.bindWithFlags = saved;
    }
  });

  it('reaches the peers of a shared mount as a bind does (a node plugin\'s Bidirectional kubelet dir)', async () => {
    const { source } = sourceOn('prop-src', 'nosuid');
    const shared = join(s.kubeletDir, 'pods', 'prop');
    const peer = join(s.root, 'peer');
    mkdirSync(shared, { recursive: true });
    mkdirSync(peer);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', shared]);
    execFileSync('mount', ['--make-shared', shared]);
    execFileSync('mount', ['--bind', shared, peer]);
    mkdirSync(join(shared, 'one-step'));
    await mounter.bind(source, { path: join(shared, 'one-step'), within: s.kubeletDir }, true);
    expect(mountAt(join(peer, 'one-step'))?.mountOptions).toContain('ro');
    expect(readFileSync(join(peer, 'one-step', 'f'), 'utf8')).toBe('prop-src');
    // A bind and then a remount on the target (an addon without bindWithFlags, mount(8)): the peer gets
    // the bind as it was made, and a remount's flags never propagate, so its copy is read-write (the
    // kernel's rule). Both steps are made on a private scratch mount point instead, and the finished
    // bind moved onto the target: a move propagates the mount with its flags (shared/bind-by-move.ts).
    const scratchMounter = new Mounter(10_000, 10_000, s.stateDir);
    mkdirSync(join(shared, 'two-steps'));
    await withoutBindWithFlags(() => scratchMounter.bind(source, { path: join(shared, 'two-steps'), within: s.kubeletDir }, true));
    expect(mountAt(join(shared, 'two-steps'))?.mountOptions).toContain('ro');
    expect(mountAt(join(peer, 'two-steps'))?.mountOptions).toContain('ro');
    expect(readFileSync(join(peer, 'two-steps', 'f'), 'utf8')).toBe('prop-src');
    setNativeMountPath(null);
    mkdirSync(join(shared, 'by-tool'));
    await scratchMounter.bind(source, { path: join(shared, 'by-tool'), within: s.kubeletDir }, true, ['noexec']);
    expect(mountAt(join(peer, 'by-tool'))?.mountOptions).toEqual(expect.arrayContaining(['ro', 'noexec']));
  });
});

describe('a bind\'s remount', () => {
  it('gives again the flags the bind has, with those asked in place of their opposites', () => {
    expect(remountOptions(['rw', 'nosuid', 'nodev', 'relatime'], ['ro'])).toEqual(['nosuid', 'nodev', 'relatime', 'ro']);
    expect(remountOptions(['ro', 'noatime'], ['rw', 'suid'])).toEqual(['noatime', 'rw', 'suid']);
    expect(remountOptions(['rw', 'noexec', 'relatime'], ['exec', 'noatime'])).toEqual(['rw', 'exec', 'noatime']);
    // Asked in order, as mount(8) reads -o: a later option undoes an earlier one.
    expect(remountOptions(['rw', 'relatime'], ['ro', 'noexec', 'nosuid', 'exec'])).toEqual(['relatime', 'ro', 'nosuid', 'exec']);
    // No atime word in mountinfo is strictatime, which a remount without one would make relatime.
    expect(remountOptions(['rw'], ['nodev'])).toEqual(['rw', 'strictatime', 'nodev']);
    expect(remountOptions(['rw'], ['noatime', 'relatime'])).toEqual(['rw', 'relatime']);
  });

  it('as flags: each option mapped, or mount(8) for any it does not know', () => {
    const n = loaded();
    const base = n.MS_REMOUNT | n.MS_BIND;
    expect(remountFlags(n, ['nosuid', 'relatime', 'ro'])).toBe(base | n.MS_NOSUID | n.MS_RELATIME | n.MS_RDONLY);
    expect(remountFlags(n, ['rw', 'strictatime', 'nodev'])).toBe(base | n.MS_STRICTATIME | n.MS_NODEV);
    for (const odd of ['nosymfollow', 'x-anything', 'constructor', '__proto__', 'toString']) expect(remountFlags(n, ['ro', odd]), odd).toBeUndefined();
  });
});
