import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Inventory } from '../../shared/index.js';
import { Mounter } from '../../shared/mounter.js';
import { mountAt, mountsStackedAt } from '../../shared/mountinfo.js';
import { setNativeMountPath } from '../../shared/native-mount.js';
import { builtAddon } from './built-addon.js';
import { expectSuccess, mountOptions, podNamed, runAdmin, runCli, runFlex } from '../helpers/flex-runner.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

/**
 * A bind with flags made without the addon's one-step call (shared/bind-by-move.ts): bound and
 * remounted on a private scratch mount point under the state dir, then moved onto its target. What a
 * killed call leaves there is undone once its process is gone. Real mounts and real kills; the
 * scratch's cleanup unmounts whatever a test left.
 */
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => {
  setNativeMountPath(undefined);
  s.cleanup();
});

const bindsDir = () => join(s.stateDir, 'binds');
const scratchPoints = () => (existsSync(bindsDir()) ? readdirSync(bindsDir()) : []);

/**
 * A mount(8), first on PATH, that SIGKILLs the process that ran it (the FlexVolume call) when asked
 * for `step` (remount, move), before doing it: a kill at that very point of a real call.
 */
function killingMount(step: 'remount' | 'move'): string {
  const bin = join(s.root, `bin-${step}`);
  mkdirSync(bin);
  const pattern = step === 'move' ? '*--move*' : '*remount*';
  writeFileSync(join(bin, 'mount'), `#!/bin/sh\ncase "$*" in ${pattern}) kill -9 $PPID; exit 1;; esac\nexec /usr/bin/mount "$@"\n`, { mode: 0o755 });
  return bin;
}

async function status(): Promise<Inventory> {
  const r = await runAdmin(s.env, ['status', '--json']);
  return JSON.parse(r.stdout) as Inventory;
}

describe('a read-only bind made without the one-step call', () => {
  it.each([
    ['remount', 'the next such bind (kubelet retrying the mount)'],
    ['move', 'a CSI server starting (Mounter.sweepScratchBinds)'],
  ] as const)('killed before its %s, leaves the target unmounted, and its scratch bind is undone by %s', async (step, _) => {
    expect((await runCli(s.env, ['create', 'kb', '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    const target = podVolumeDir(s.kubeletDir, 'uid-k', 'pv-kb');
    const opts = mountOptions('pv-kb', podNamed('uid-k'), { volumeId: 'kb', 'kubernetes.io/readwrite': 'ro' });
    // No addon: every step is mount(8), so the one-step bind (native/bind.c) is not there to take.
    const noAddon = { ...s.env, TWINVOL_NATIVE_MOUNT: 'off' };
    const killed = await runFlex({ ...noAddon, PATH: `${killingMount(step)}:/usr/bin:/bin` }, ['mount', target, opts]).then(
      (r) => r,
      (err: Error) => err,
    );
    expect(killed).toBeInstanceOf(Error);
    // Before: a kill between the bind and its remount left the target mounted read-write, and kubelet
    // never repeats a FlexVolume mount on a mount point.
    expect(mountAt(target)).toBeUndefined();
    const [left, ...more] = scratchPoints();
    expect(more).toEqual([]);
    const point = join(realpathSync(bindsDir()), left ?? '');
    expect(mountAt(point)?.mountOptions).toContain(step === 'move' ? 'ro' : 'rw');
    // The publish record is written before the mount is made (kubelet's retry repairs it either way);
    // the killed call's lock shows as stale once it is a second old, which a loaded machine may reach.
    expect((await status()).problems.filter((p) => p.kind !== 'stale-lock')).toEqual([
      expect.objectContaining({ kind: 'record-without-mount', subject: target, volumeId: 'kb' }),
      expect.objectContaining({ kind: 'stranded-scratch-bind', subject: point, volumeId: 'kb' }),
    ]);

    if (step === 'move') expect(await new Mounter(10_000, 10_000, s.stateDir).sweepScratchBinds()).toEqual([point]);
    expectSuccess(await runFlex(noAddon, ['mount', target, opts]));
    expect(mountAt(point)).toBeUndefined();
    expect(scratchPoints()).toEqual([]);
    expect(mountAt(target)?.mountOptions).toContain('ro');
    expect((await status()).problems).toEqual([]);
    expectSuccess(await runFlex(noAddon, ['unmount', target]));
    expect(mountAt(target)).toBeUndefined();
  });

  it('makes its private parent under a lock no volume\'s node lock can be, which its caller holds (a volume named binds)', async () => {
    expect((await runCli(s.env, ['create', 'binds', '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    const target = podVolumeDir(s.kubeletDir, 'uid-b', 'pv-binds');
    const opts = mountOptions('pv-binds', podNamed('uid-b'), { volumeId: 'binds', 'kubernetes.io/readwrite': 'ro' });
    const noAddon = { ...s.env, TWINVOL_NATIVE_MOUNT: 'off' };
    expectSuccess(await runFlex(noAddon, ['mount', target, opts]));
    expect(mountAt(target)?.mountOptions).toContain('ro');
    expectSuccess(await runFlex(noAddon, ['unmount', target]));
  });

  it('leaves alone the scratch points of a live process, and of another pid namespace', async () => {
    const mounter = new Mounter(10_000, 10_000, s.stateDir);
    setNativeMountPath(null);
    const source = join(s.root, 'src');
    const target = join(s.kubeletDir, 'pods', 'p', 'target');
    mkdirSync(source);
    mkdirSync(target, { recursive: true });
    await mounter.bind(source, { path: target, within: s.kubeletDir }, true);
    const ns = /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1];
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    // A process that has exited: its pid names none now, or another process started later.
    const dead = Number(execFileSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' }).trim());
    const names = { live: `${ns}.${process.pid}.${start}.900`, otherNamespace: `1.${dead}.1.901`, dead: `${ns}.${dead}.1.902`, foreign: 'not-ours' };
    for (const name of Object.values(names)) mkdirSync(join(bindsDir(), name));
    const real = realpathSync(bindsDir());
    expect(await mounter.sweepScratchBinds()).toEqual([join(real, names.dead)]);
    expect(scratchPoints().sort()).toEqual([names.live, names.otherNamespace, names.foreign].sort());
  });

  it('makes its private parent once, however many binds start at once, each on a scratch point of its own', async () => {
    const mounter = new Mounter(10_000, 10_000, s.stateDir);
    const native = builtAddon('bindWithFlags');
    const saved = native.bindWithFlags;
    Reflect.deleteProperty(native, 'bindWithFlags');
    const targets = Array.from({ length: 6 }, (_, i) => join(s.kubeletDir, 'pods', `p${i}`, 'target'));
    const source = join(s.root, 'src');
    mkdirSync(source);
    for (const t of targets) mkdirSync(t, { recursive: true });
    try {
      await Promise.all(targets.map((t) => mounter.bind(source, { path: t, within: s.kubeletDir }, true)));
    } finally {
      native.bindWithFlags = saved;
    }
    for (const t of targets) expect(mountAt(t)?.mountOptions, t).toContain('ro');
    const parent = mountsStackedAt(realpathSync(bindsDir()));
    expect(parent.length).toBe(1);
    expect(parent[0]?.propagation).toEqual([]);
    expect(scratchPoints()).toEqual([]);
  });
});

describe('a read-only bind of a device onto a file (a raw block publish) made without the one-step call', () => {
  it('is made on a scratch file, not a directory, moved, and leaves no scratch point', async () => {
    // A bind joins objects of one kind: a device onto a file. The scratch point was a directory,
    // and mount(2) answered ENOTDIR (test/upgrade/csi-node.test.ts, new executables with an older addon).
    const target = join(s.kubeletDir, 'plugins', 'raw-target');
    mkdirSync(join(s.kubeletDir, 'plugins'), { recursive: true });
    writeFileSync(target, '');
    setNativeMountPath(null);
    await new Mounter(10_000, 10_000, s.stateDir).bind('/dev/null', { path: target, within: s.kubeletDir }, true);
    expect(mountAt(target)?.mountOptions).toContain('ro');
    expect(scratchPoints()).toEqual([]);
  });
});
