// Which of Node's builtins a FlexVolume call loads, counted rather than timed: each of these costs
// a tenth of bare `node -e 0` or more to load (docs/architecture.md, "Start-up of the FlexVolume
// executable"), so a verb that does not use one must not load it. Node lists every builtin it
// has loaded in process.moduleLoadList; a preload script prints that list at exit, on stderr, which
// is why this runs the bundle under `node -r` here rather than as kubelet does.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FLEX_BUILDS, flexOptions, mountOptions } from '../helpers/flex-runner.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { mountsUnder } from '../helpers/scratch.js';
import { call, createVolume, KUBELET_PATH, nonAttachable, pod, s, useKubeletWorld } from './helpers/kubelet-world.js';

useKubeletWorld();

// internal/fs/promises too: the `promises` getter of node:fs loads it without the public module.
const EXPENSIVE = ['crypto', 'child_process', 'assert', 'worker_threads', 'net', 'url', 'zlib', 'fs/promises', 'internal/fs/promises', 'perf_hooks', 'stream'];
/** What a process had at its exit: the builtins it loaded, and its threads. */
interface AtExit {
  modules: string[];
  threads: number;
}

async function atExit(args: string[]): Promise<{ stdout: string; at: AtExit }> {
  const preload = join(s.root, 'list-builtins.cjs');
  // Written with fs.writeSync: process.stderr would itself load net.
  writeFileSync(preload, "process.on('exit', () => { const fs = require('fs'); fs.writeSync(2, JSON.stringify({ modules: process.moduleLoadList, threads: fs.readdirSync('/proc/self/task').length })); });\n");
  const c = await call(['-r', preload, ...args], { bin: process.execPath, env: { PATH: KUBELET_PATH, ...s.env } });
  return { stdout: c.stdout, at: JSON.parse(c.stderr) as AtExit };
}

/** The expensive builtins a call loaded, after its reply. */
async function loadedBy(argv: string[]): Promise<string[]> {
  const { stdout, at } = await atExit([FLEX_BUILDS.bundle, ...argv]);
  expect(JSON.parse(stdout)).toMatchObject({ status: 'Success' });
  // Less what Node loads for `node -r ... -e 0` itself.
  const bare = (await atExit(['-e', '0'])).at.modules;
  return EXPENSIVE.filter((name) => at.modules.includes(`NativeModule ${name}`) && !bare.includes(`NativeModule ${name}`));
}

/** How many threads a call had at its exit beyond those of `node -e 0`: libuv's threadpool adds four. */
async function extraThreads(argv: string[]): Promise<number> {
  const { stdout, at } = await atExit([FLEX_BUILDS.bundle, ...argv]);
  expect(JSON.parse(stdout)).toMatchObject({ status: 'Success' });
  return at.threads - (await atExit(['-e', '0'])).at.threads;
}

describe('a FlexVolume call loads only the builtins it uses', () => {
  it('init, getvolumename, isattached and a dir mount and unmount load none of the expensive ones', async () => {
    nonAttachable();
    await createVolume('vol-b', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-b', { volumeId: 'vol-b' });
    expect(await loadedBy(['init'])).toEqual([]);
    // The first call of each verb makes its compile cache (zlib inflates the dispatcher); the next
    // ones use it (flex/compile-cache.ts).
    expect(await loadedBy(['getvolumename', opts])).toEqual(['zlib', 'stream']);
    expect(await loadedBy(['getvolumename', opts])).toEqual([]);
    await loadedBy(['isattached', opts, 'node-a']);
    expect(await loadedBy(['isattached', opts, 'node-a'])).toEqual([]);
    const dir = podVolumeDir(s.kubeletDir, 'uid-b', 'pv-b');
    for (const verb of [['mount', dir, mountOptions('pv-b', pod('uid-b'), { volumeId: 'vol-b' })], ['unmount', dir]]) await loadedBy(verb);
    // Not loaded: child_process, net and stream (mount(8) and umount(8) run blocking, their output
    // in files: shared/spawn-blocking.ts), crypto (the mount record's name is a sha256, made by
    // shared/sha256.ts), fs/promises (the core's asynchronous calls go through shared/fs-async.ts),
    // assert (signal-exit 3, under proper-lockfile) and perf_hooks (the global performance).
    expect(await loadedBy(['mount', dir, mountOptions('pv-b', pod('uid-b'), { volumeId: 'vol-b' })])).toEqual([]);
    expect(mountsUnder(dir)).toHaveLength(1);
    expect(await loadedBy(['unmount', dir])).toEqual([]);
    expect(mountsUnder(dir)).toEqual([]);
    // Its file calls run on its own thread (shared/fs-async.ts): libuv's four are never started.
    expect(await extraThreads(['mount', dir, mountOptions('pv-b', pod('uid-b'), { volumeId: 'vol-b' })])).toBe(0);
    expect(await extraThreads(['unmount', dir])).toBe(0);
  });

  it('attach and detach, which lock and write the catalog but run nothing, load none of them', async () => {
    await createVolume('vol-a', '--backend', 'block', '--size', '16Mi');
    const opts = flexOptions('pv-a', { volumeId: 'vol-a' });
    // Each verb's first call makes its compile cache (zlib), as above.
    for (const verb of [['attach', opts, 'node-a'], ['detach', 'pv-a', 'node-a']]) await loadedBy(verb);
    // proper-lockfile's copy of its fs (shared/store/lock.ts) once loaded fs/promises and streams here.
    expect(await loadedBy(['attach', opts, 'node-a'])).toEqual([]);
    expect(await loadedBy(['detach', 'pv-a', 'node-a'])).toEqual([]);
  });
});
