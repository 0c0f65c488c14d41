import { failedPrecondition } from './errors.js';
import { type MountEntry, mountAt } from './mountinfo.js';
import { CommandError, run } from './runner.js';

/** The system tools behind every backend, with one deadline for all of them. */
export class Mounter {
  constructor(private readonly timeoutMs: number) {}

  private exec(command: string, args: readonly string[], okExitCodes?: readonly number[]) {
    return run(command, args, { timeoutMs: this.timeoutMs, okExitCodes });
  }

  async mount(source: string, target: string, opts: { fsType?: string; options?: readonly string[] } = {}): Promise<void> {
    const args: string[] = [];
    if (opts.fsType) args.push('-t', opts.fsType);
    if (opts.options?.length) args.push('-o', opts.options.join(','));
    // "--" ends option parsing: a source can never be read as a flag.
    await this.exec('mount', [...args, '--', source, target]);
  }

  /** A bind mount; util-linux applies "ro" (and `extra` flags) with the remount the kernel needs for bind mounts. */
  bind(source: string, target: string, readonly: boolean, extra: readonly string[] = []): Promise<void> {
    return this.mount(source, target, { options: [...(readonly ? ['bind', 'ro'] : ['bind']), ...extra] });
  }

  /**
   * Unmounts whatever is mounted at `target` until nothing is. A stale mount (ENOTCONN, ESTALE) is
   * forced and then detached lazily, as kubelet's own mounter does, rather than reported.
   */
  async unmountAll(target: string): Promise<void> {
    for (let guard = 0; guard < 16 && mountAt(target); guard++) {
      try {
        await this.exec('umount', ['--', target]);
      } catch (err) {
        if (!(err instanceof CommandError)) throw err;
        if (!mountAt(target)) return;
        if (/busy/i.test(err.result.stderr)) throw failedPrecondition(`${target} is busy: ${err.result.stderr.trim()}`);
        await this.exec('umount', ['-f', '-l', '--', target]);
      }
    }
  }

  /** The filesystem type on a device, or undefined when blkid finds none (exit code 2). */
  async probeFsType(device: string): Promise<string | undefined> {
    const r = await this.exec('blkid', ['-p', '-s', 'TYPE', '-o', 'value', '--', device], [2]);
    return r.exitCode === 2 || r.stdout.trim() === '' ? undefined : r.stdout.trim();
  }

  async format(device: string, fsType: 'ext4' | 'xfs'): Promise<void> {
    if (fsType === 'ext4') await this.exec('mkfs.ext4', ['-q', '-F', '-m', '0', '--', device]);
    else await this.exec('mkfs.xfs', ['-q', '--', device]);
  }

  /** Grows a mounted filesystem. ext4 needs CAP_SYS_RESOURCE for this; see growExt4Offline. */
  async growFs(device: string, mountPath: string, fsType: string): Promise<void> {
    if (fsType === 'xfs') {
      await this.exec('xfs_growfs', [mountPath]);
      return;
    }
    try {
      await this.exec('resize2fs', [device]);
    } catch (err) {
      if (err instanceof CommandError && /Permission denied/.test(err.result.stderr))
        throw failedPrecondition(
          `online ext4 resize of ${device} is not permitted on this host (the kernel wants CAP_SYS_RESOURCE); the filesystem grows when the volume is next staged`,
        );
      throw err;
    }
  }

  /** Grows an unmounted ext4 filesystem; resize2fs insists on a fresh check first. */
  async growExt4Offline(device: string): Promise<void> {
    // e2fsck -p exits 1 when it fixed something, which is still a filesystem fit to resize.
    await this.exec('e2fsck', ['-f', '-p', device], [1]);
    await this.exec('resize2fs', [device]);
  }

  async loopAttach(image: string): Promise<string> {
    const r = await this.exec('losetup', ['--find', '--show', '--', image]);
    return r.stdout.trim();
  }

  async loopDetach(device: string): Promise<void> {
    await this.exec('losetup', ['--detach', device]);
  }

  /** Makes the loop device see the new size of its grown image. */
  async loopRefresh(device: string): Promise<void> {
    await this.exec('losetup', ['--set-capacity', device]);
  }

  /** Sparse-aware copy; reflink where the filesystem can share extents. */
  async copySparse(from: string, to: string): Promise<void> {
    await this.exec('cp', ['--reflink=auto', '--sparse=always', '--', from, to]);
  }

  async copyTree(from: string, to: string): Promise<void> {
    await this.exec('cp', ['-a', '--reflink=auto', '--sparse=always', '--', `${from}/.`, to]);
  }
}

export function describeMount(entry: MountEntry): string {
  return `${entry.source} (${entry.fsType}) at ${entry.mountPoint}`;
}
