import { realpath } from './fs-async.js';
import type { Config } from './config.js';
import { errnoCode, failedPrecondition, invalidArgument } from './errors.js';
import type { Origin } from './model.js';

/** A source that names a path of this host (a directory to bind, an image file), not tmpfs or host:/export. */
export const isHostPath = (source: string): boolean => source.startsWith('/');

const under = (path: string, root: string) => path === root || path.startsWith(`${root}/`);

/**
 * Who may choose a host path as a static volume's source: the administrator, with `twinvol volume
 * create`, anywhere; a PV or StorageClass writer (FlexVolume options with createIfMissing, CSI
 * parameters) only under a root the administrator listed in `staticSourceRoots`. A PV writer is not
 * the node's administrator: without this rule, `source: /` with `mountOptions: bind` hands a pod the
 * host's root.
 */
export function requireSourceAllowed(config: Config, source: string, origin: Origin): void {
  if (!isHostPath(source) || origin === 'cli') return;
  if (config.staticSourceRoots.some((root) => under(source, root))) return;
  throw invalidArgument(
    `static source ${source.slice(0, 256)} is a host path: only an administrator may choose one (twinvol volume create), ` +
      'or list a root that holds it in the staticSourceRoots setting',
  );
}

/**
 * The source to mount, resolved through symlinks and checked again for volumes a PV writer made: a
 * link planted under an allowed root must not lead the mount out of it.
 */
export async function resolveSource(config: Config, source: string, origin: Origin): Promise<string> {
  if (!isHostPath(source) || origin === 'cli') return source;
  let real: string;
  try {
    real = await realpath(source);
  } catch (err) {
    throw failedPrecondition(`static source ${source.slice(0, 256)} cannot be resolved (${errnoCode(err) ?? 'error'})`);
  }
  const roots = await Promise.all(config.staticSourceRoots.map((root) => realpath(root).catch(() => root)));
  if (!roots.some((root) => under(real, root)))
    throw failedPrecondition(`static source ${source.slice(0, 256)} leads to ${real.slice(0, 256)}, outside the allowed staticSourceRoots`);
  return real;
}
