// A node's other mounts: the CSI server's dir lifecycle with many mounts on the node (a kubelet node
// has one per pod secret, config map, token and overlay) against the same with none, in interleaved
// rounds. Whether a path is mounted is asked of the kernel for that path (shared/mountinfo.ts
// isMountPoint), so the ratio stays near 1; reading /proc/self/mountinfo for each such question made
// it 1.9x at 1,000 mounts (5bd3296). The other mounts are binds of one directory onto itself, under
// the scratch world (released with it whatever happens), made and undone between rounds with the
// mount addon the build put beside the server, or mount(8) and umount(8) where there is none.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { NATIVE_MOUNT_FILE } from '../addon-files.mjs';
import { CSI_BIN, interleaved, launch, lifecycles, makeScratch, median, progress, row } from './lib.mjs';

/** The addon beside the server (scripts/build.mjs puts it there), or undefined. */
function addon() {
  const path = join(CSI_BIN, '..', NATIVE_MOUNT_FILE);
  if (!existsSync(path)) return undefined;
  const module = { exports: {} };
  process.dlopen(module, path);
  return module.exports;
}

/** Binds `dirs` each onto itself, or undoes them: a failure throws, since the row would be a lie. */
function setMounts(native, dirs, mounted) {
  for (const d of dirs) {
    const errno = native ? (mounted ? native.mount(d, d, null, native.MS_BIND, null) : native.umount(d, 0)) : undefined;
    if (errno === 0) continue;
    const r = mounted ? spawnSync('mount', ['--bind', d, d]) : spawnSync('umount', [d]);
    if (r.status !== 0) throw new Error(`${mounted ? 'bind' : 'unmount'} ${d} failed: ${r.stderr}`);
  }
}

export const suite = {
  title: 'CSI with many mounts on the node',
  order: 35,
  async run({ short }) {
    const others = short ? 100 : 1000;
    const perRound = short ? 4 : 20;
    const rounds = short ? 1 : 4;
    const s = makeScratch('mounts');
    let srv;
    try {
      const dirs = Array.from({ length: others }, (_, i) => join(s.root, 'other-mounts', `d${i}`));
      for (const d of dirs) mkdirSync(d, { recursive: true });
      const native = addon();
      srv = await launch('twinvol', s, 'mounts');
      progress(`${rounds} rounds of ${perRound} dir lifecycles with ${others} other mounts on the node and with none`);
      let batch = 0;
      // Mounted for the rounds that want them, and undone at once: the other contender sees none.
      const perLifecycle = (mounted) => async () => {
        if (mounted) setMounts(native, dirs, true);
        try {
          return (await lifecycles(srv, s, `m${batch++}`, perRound, 1)) / perRound;
        } finally {
          if (mounted) setMounts(native, dirs, false);
        }
      };
      const [withMounts, without] = await interleaved([perLifecycle(true), perLifecycle(false)], rounds);
      return [row('scale.mounts.lifecycle', `CSI: node lifecycle, dir volume, ${others} other mounts vs none`, median(withMounts), 'ms', median(without), 'no other mounts')];
    } finally {
      await srv?.stop();
      s.cleanup();
    }
  },
};
