// Checks that the system tools twinvol drives are on this machine, and installs the Debian packages
// that provide them when they are missing and we are root with apt-get (a fresh CI machine).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const TOOLS = {
  'mkfs.ext4': 'e2fsprogs', e2fsck: 'e2fsprogs', resize2fs: 'e2fsprogs',
  'mkfs.xfs': 'xfsprogs', xfs_growfs: 'xfsprogs', fsfreeze: 'util-linux',
  losetup: 'util-linux', blkid: 'util-linux', mount: 'mount', umount: 'mount',
};
const DIRS = ['/usr/sbin', '/sbin', '/usr/bin', '/bin', '/usr/local/sbin', '/usr/local/bin'];
const missing = () => Object.keys(TOOLS).filter((t) => !DIRS.some((d) => existsSync(`${d}/${t}`)));

let absent = missing();
if (absent.length) {
  const packages = [...new Set(absent.map((t) => TOOLS[t]))];
  const canInstall = process.getuid?.() === 0 && DIRS.some((d) => existsSync(`${d}/apt-get`));
  if (!canInstall) {
    console.error(`twinvol needs ${absent.join(', ')}: install the Debian packages ${packages.join(' ')}`);
    process.exit(1);
  }
  console.error(`installing ${packages.join(' ')} for ${absent.join(', ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...packages], { stdio: 'inherit', env });
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
