// Checks that the system tools twinvol drives are on this machine, and installs the Debian packages
// that provide them when they are missing and we are root with apt-get (a fresh CI machine).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BUILT_ADDON } from './addon-files.mjs';

const TOOLS = {
  'mkfs.ext4': 'e2fsprogs', e2fsck: 'e2fsprogs', resize2fs: 'e2fsprogs',
  'mkfs.xfs': 'xfsprogs', xfs_growfs: 'xfsprogs', fsfreeze: 'util-linux',
  losetup: 'util-linux', blkid: 'util-linux', fsck: 'util-linux', mount: 'mount', umount: 'mount',
};
const DIRS = ['/usr/sbin', '/sbin', '/usr/bin', '/bin', '/usr/local/sbin', '/usr/local/bin'];
const missing = () => Object.keys(TOOLS).filter((t) => !DIRS.some((d) => existsSync(`${d}/${t}`)));

const canInstall = process.getuid?.() === 0 && DIRS.some((d) => existsSync(`${d}/apt-get`));

/** Installs Debian `packages` (for `why`) where we are root with apt-get; false where we cannot. */
function install(packages, why) {
  if (!canInstall) return false;
  console.error(`installing ${packages.join(' ')} for ${why}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...packages], { stdio: 'inherit', env });
  return true;
}

let absent = missing();
if (absent.length) {
  const packages = [...new Set(absent.map((t) => TOOLS[t]))];
  if (!install(packages, absent.join(', '))) {
    console.error(`twinvol needs ${absent.join(', ')}: install the Debian packages ${packages.join(' ')}`);
    process.exit(1);
  }
  absent = missing();
  if (absent.length) {
    console.error(`still missing after install: ${absent.join(', ')}`);
    process.exit(1);
  }
}
if (process.getuid?.() !== 0) {
  console.error('twinvol mounts filesystems and attaches loop devices: run this as root');
  process.exit(1);
}

/**
 * --addon (the tests): the mount addon must be built, since the tests run it as both executables do
 * (test/shared/native-*.test.ts, the counts). npm ci only warns when it cannot build it (no compiler:
 * scripts/build-native.mjs), so a machine without make, g++ and python3 gets them here, as it gets the
 * tools above, and the addon is built again; where that cannot be done, one line says what is missing.
 */
const root = join(import.meta.dirname, '..');
if (process.argv.includes('--addon') && !existsSync(join(root, BUILT_ADDON))) {
  // node-gyp's needs; each Debian package is named as its tool.
  const lacking = ['make', 'g++', 'python3'].filter((t) => !DIRS.some((d) => existsSync(`${d}/${t}`)));
  if (lacking.length) install(lacking, `the mount addon (${lacking.join(', ')})`);
  spawnSync(process.execPath, [join(root, 'scripts/build-native.mjs')], { cwd: root, stdio: 'inherit' });
  if (!existsSync(join(root, BUILT_ADDON))) {
    console.error(`twinvol: the tests need the mount addon (native/*.c) and it could not be built${lacking.length ? `: install ${lacking.join(', ')}` : ' (see above)'}, then run npm ci again`);
    process.exit(1);
  }
}

/**
 * --addon (the tests) also asks for bindfs, a FUSE filesystem that stands in for a network data root
 * (test/shared/network-data-root.test.ts). Not a tool twinvol runs: where it cannot be installed, that
 * test skips what needs it and says so.
 */
if (process.argv.includes('--addon') && !DIRS.some((d) => existsSync(`${d}/bindfs`)) && existsSync('/dev/fuse')) {
  try {
    install(['bindfs'], 'the tests of a data root on a network filesystem (a FUSE mount stands in for one)');
  } catch {
    console.error('twinvol: bindfs could not be installed; the tests that mount one will skip');
  }
}
