import { join } from 'node:path';
import { walkCalls } from './fs-async.js';

// The walk's calls: a volume may hold any number of files (shared/fs-async.ts walkCalls).
const { chmod, chown, lstat, readdir } = walkCalls;

/**
 * Gives group `gid` ownership of a volume's tree with group read-write and setgid directories, as
 * kubelet's SetVolumeOwnership does; twinvol does it itself (capability fsGroup:false) so that it
 * happens on the volume root it mounted, once, before the pod starts.
 */
export async function applyFsGroup(root: string, gid: number): Promise<void> {
  const walk = async (path: string): Promise<void> => {
    const st = await lstat(path);
    if (st.isSymbolicLink()) return;
    if (st.gid !== gid) await chown(path, st.uid, gid);
    const wanted = st.isDirectory() ? (st.mode | 0o2070) & 0o7777 : (st.mode | 0o060) & 0o7777;
    if ((st.mode & 0o7777) !== wanted) await chmod(path, wanted);
    if (st.isDirectory()) for (const name of await readdir(path)) await walk(join(path, name));
  };
  await walk(root);
}
