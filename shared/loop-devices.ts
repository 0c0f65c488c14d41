import { readdirSync, readFileSync } from 'node:fs';

/**
 * Finds the loop device backed by `image` from sysfs, which costs no spawn. The kernel, not a record,
 * is the truth: after a crash between losetup and a record write, or a reboot, this still answers right.
 */
export function findLoopDevice(image: string): string | undefined {
  let names: string[];
  try {
    names = readdirSync('/sys/block').filter((n) => n.startsWith('loop'));
  } catch {
    return undefined;
  }
  for (const name of names) {
    let backing: string;
    try {
      backing = readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim();
    } catch {
      continue;
    }
    if (backing === image || backing === `${image} (deleted)`) return `/dev/${name}`;
  }
  return undefined;
}
