// A FlexVolume call keeps a tool's output in unnamed files (O_TMPFILE) in /dev/shm or /tmp
// (shared/spawn-blocking.ts), and runs the tool the runner's way where neither can hold one. That
// second way is taken here for real: the executable runs in a mount namespace of its own where both
// are read-only, and the namespace goes with the shell, taking the mount the call made with it.
import { spawnSync } from 'node:child_process';
import { expect, it } from 'vitest';
import { FLEX_BIN, mountOptions } from '../helpers/flex-runner.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { mountsUnder } from '../helpers/scratch.js';
import { createVolume, KUBELET_PATH, pod, s, useKubeletWorld } from './helpers/kubelet-world.js';

useKubeletWorld();

/** Linux's O_TMPFILE (with O_DIRECTORY): what the probe below tries, as the executable does. */
const PROBE = `const fs = require('node:fs');
for (const d of ['/dev/shm', '/tmp']) {
  try { fs.closeSync(fs.openSync(d, fs.constants.O_RDWR | 0o20200000, 0o600)); console.log(d + ' holds one'); }
  catch (e) { console.log(d + ' ' + e.code); }
}`;

it('mounts and unmounts a dir volume where neither /dev/shm nor /tmp can hold an unnamed file', async () => {
  await createVolume('vol-t', '--backend', 'dir', '--size', '1Mi');
  const dir = podVolumeDir(s.kubeletDir, 'uid-t', 'pv-t');
  const setUp = [
    // The namespace starts as a copy of every mount, other test files' under /tmp included; it lets
    // go of them first, so that their unmounts and loop detaches are not held up by this copy.
    "awk '$2 ~ /^[/]tmp[/]/ {print $2}' /proc/self/mounts | sort -r | xargs -r -n1 umount -l",
    // The world stays writable as a mount of its own inside a read-only /tmp.
    'mount --bind "$WORLD" "$WORLD"',
    'mount --rbind /tmp /tmp',
    'mount -o remount,bind,ro /tmp',
    'mount -t tmpfs -o ro tmpfs /dev/shm',
  ].join(' && ');
  const calls = [
    '"$NODE" -e "$PROBE"',
    '"$FLEX" mount "$DIR" "$OPTS"; echo',
    // The mount exists only in this namespace: counted here, before the namespace goes.
    'echo "mounts: $(grep -cF " $DIR " /proc/self/mountinfo)"',
    '"$FLEX" unmount "$DIR"; echo',
    'echo "mounts: $(grep -cF " $DIR " /proc/self/mountinfo)"',
  ].join('; ');
  const run = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c', `${setUp} && { ${calls}; }`], {
    encoding: 'utf8',
    timeout: 60_000,
    env: {
      PATH: `${KUBELET_PATH}:/usr/sbin:/sbin`,
      ...s.env,
      WORLD: s.root,
      NODE: process.execPath,
      PROBE,
      FLEX: FLEX_BIN,
      DIR: dir,
      OPTS: mountOptions('pv-t', pod('uid-t'), { volumeId: 'vol-t' }),
    },
  });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  const lines = run.stdout.trim().split('\n');
  // Without this, the executable would have had its unnamed files and the test would prove nothing.
  expect(lines.slice(0, 2)).toEqual(['/dev/shm EROFS', '/tmp EROFS']);
  expect(lines.slice(2).map((l) => (l.startsWith('{') ? JSON.parse(l) : l))).toEqual([{ status: 'Success' }, 'mounts: 1', { status: 'Success' }, 'mounts: 0']);
  expect(mountsUnder(s.root)).toEqual([]);
});
