import { failedPrecondition, resourceExhausted, systemErrorInOutput } from './errors.js';
import { isMountPointAsync, type MountEntry, mountsStackedAt, topMountAt } from './mountinfo.js';
import { CHILD_FD_PATH, type MountTarget, type PinnedTarget, pinTarget, requireWithin, whereIs } from './pinned-target.js';
import { CommandError, errorDetail, run } from './runner.js';
import { type MountIds, nativeMount } from './native-mount.js';
import { remountOptions } from './mount-options.js';
import { bindNatively, bindWithFlagsNatively, loopAttachNatively, loopIoctlNatively, mountNatively, remountNatively, unmountNatively } from './native-steps.js';
import { bindByMove, type BindSteps, sweepScratchBinds } from './bind-by-move.js';

/**
 * The tools that walk or copy a volume's data, and so may run for minutes on a large one. The rest
 * ask the kernel one thing (mount, losetup, blkid) and answer in milliseconds.
 */
const WALKS_DATA = new Set(['mkfs.ext4', 'mkfs.xfs', 'e2fsck', 'fsck', 'resize2fs', 'xfs_growfs', 'cp']);

/** The system tools behind every backend, with one deadline for all of them. */
export class Mounter {
  /**
   * `dataTimeoutMs` is the deadline of a tool that walks a volume's data (WALKS_DATA), which grows
   * with the volume. `stateDir` holds the scratch mount points of a bind finished before it is moved
   * (shared/bind-by-move.ts); a Mounter given none (a test of the tools alone) remounts on the target.
   */
  constructor(private readonly timeoutMs: number, private readonly dataTimeoutMs = timeoutMs, private readonly stateDir?: string) {}

  private exec(command: string, args: readonly string[], okExitCodes?: readonly number[], fd3?: number) {
    const lengthy = WALKS_DATA.has(command);
    return run(command, args, { timeoutMs: lengthy ? this.dataTimeoutMs : this.timeoutMs, okExitCodes, fd3, lengthy });
  }

  /**
   * Mounts `source` onto the pinned target object (shared/pinned-target.ts), never onto a path that
   * could be swapped on the way. A bind with options is made with them in one step where the addon
   * and kernel can (bindWithFlagsNatively); otherwise it is bound and remounted on a private scratch
   * mount point, then moved onto the target finished (shared/bind-by-move.ts says why).
   * `--no-canonicalize` keeps mount(8) from turning /proc/self/fd/3 back into a path.
   */
  async mount(source: string, target: MountTarget, opts: { fsType?: string; options?: readonly string[] } = {}): Promise<void> {
    const bind = opts.options?.includes('bind') ?? false;
    const options = (opts.options ?? []).filter((o) => o !== 'bind');
    const pinned = await pinTarget(target);
    try {
      if (bind && options.length) {
        if (bindWithFlagsNatively(source, pinned, target, options)) await this.requireLanded(pinned, target);
        else if (this.stateDir !== undefined) await bindByMove(this.steps(), this.stateDir, source, pinned, target, options);
        else await this.bindThenRemount(source, pinned, target, options);
        return;
      }
      await this.mountOnto(source, pinned, target, bind, opts.fsType, options);
      await this.requireLanded(pinned, target);
    } finally {
      await pinned.handle.close();
    }
  }

  /** A mount (`bind`, or of a filesystem with its options) onto the pinned object: by the addon, else by mount(8). */
  private async mountOnto(source: string, pinned: PinnedTarget, target: MountTarget, bind: boolean, fsType: string | undefined, options: readonly string[]): Promise<void> {
    if (bind ? bindNatively(source, pinned, target) : await mountNatively(source, pinned, target, fsType, options)) return;
    // A bind has no filesystem type of its own (mount(8) refuses "-t none --bind").
    const args = ['--no-canonicalize'];
    if (bind) args.push('--bind');
    else args.push(...(fsType ? ['-t', fsType] : []), ...(options.length ? ['-o', options.join(',')] : []));
    // "--" ends option parsing: a source can never be read as a flag.
    await this.exec('mount', [...args, '--', source, CHILD_FD_PATH], undefined, pinned.handle.fd);
  }

  /** A bind, then a remount of it with `options`: undone when the remount fails. */
  private async bindThenRemount(source: string, pinned: PinnedTarget, target: MountTarget, options: readonly string[]): Promise<MountIds> {
    await this.mountOnto(source, pinned, target, true, undefined, []);
    const made = await this.requireLanded(pinned, target);
    try {
      await this.remountBind(made, target, options);
    } catch (err) {
      // A bind without its flags (a read-only publish left writable) must not stay behind.
      await this.exec('umount', ['--no-canonicalize', '--', made.mountPoint]).catch(() => undefined);
      throw err;
    }
    return made;
  }

  /** What shared/bind-by-move.ts makes a bind with: this Mounter's own steps. */
  private steps(): BindSteps {
    return {
      bindThenRemount: (source, pinned, target, options) => this.bindThenRemount(source, pinned, target, options),
      requireLanded: (pinned, target) => this.requireLanded(pinned, target),
      mountTool: async (args, fd3) => void (await this.exec('mount', args, undefined, fd3)),
      unmountAll: (path) => this.unmountAll(path),
    };
  }

  /** Undoes the scratch binds of killed processes (shared/bind-by-move.ts): a CSI server runs it as it starts. */
  sweepScratchBinds(): Promise<string[]> {
    return this.stateDir === undefined ? Promise.resolve([]) : sweepScratchBinds(this.steps(), this.stateDir);
  }

  /**
   * Mounts the filesystem in an image file through a loop device bound for this mount alone, with
   * LO_FLAGS_AUTOCLEAR: the kernel releases it at its last close (the unmount), so no losetup --detach
   * follows, and a process killed before the mount holds it leaves no device behind (its descriptor
   * closes with it). The addon binds it (LOOP_CONFIGURE) and the mount is mount(2): no process. Where
   * the addon cannot, mount -o loop does the same in one process. Answers false, having mounted
   * nothing, when mount(8) could not set up a device (none free): the caller then attaches with
   * losetup, whose error names the cause.
   */
  async mountImage(image: string, target: MountTarget, opts: { fsType: string; options: readonly string[] }): Promise<boolean> {
    const attached = loopAttachNatively(image, true);
    if (attached) {
      try {
        await this.mount(attached.device, target, opts);
        return true;
      } finally {
        // Held open until the mount holds the device; after a failed mount, this lets it go.
        attached.close();
      }
    }
    try {
      await this.mount(image, target, { fsType: opts.fsType, options: ['loop', ...opts.options] });
      return true;
    } catch (err) {
      // libmount's wording for MNT_ERR_LOOPDEV (util-linux 2.38).
      if (err instanceof CommandError && /failed to setup loop device/.test(err.result.stderr)) return false;
      throw err;
    }
  }

  /** A bind mount, read-only (and with `extra` flags) through a remount of the bind itself. */
  bind(source: string, target: MountTarget, readonly: boolean, extra: readonly string[] = []): Promise<void> {
    return this.mount(source, target, { options: ['bind', ...(readonly ? ['ro'] : []), ...extra] });
  }

  /**
   * The new mount must sit on the pinned object, under the root, even if a directory above it was
   * renamed while the mount was made; otherwise it is undone. The kernel is asked for the one mount on
   * top (topMountAt) before the whole table is read: only when that is not the new mount (something
   * was stacked on it since, or the kernel cannot say) is the table searched, as it always was.
   */
  private async requireLanded(pinned: PinnedTarget, target: MountTarget): Promise<MountIds> {
    const now = await whereIs(pinned.handle);
    const top = topMountAt(now);
    const made = top?.parentId === pinned.mountId ? top : mountsStackedAt(now).reverse().find((m) => m.parentId === pinned.mountId);
    if (!made) throw failedPrecondition(`the mount onto ${target.path} did not appear where it was made (${now.slice(0, 256)})`);
    try {
      await requireWithin(now, target);
    } catch (err) {
      await this.exec('umount', ['--no-canonicalize', '--', now]).catch(() => undefined);
      throw err;
    }
    return made;
  }

  /**
   * Applies flags to a bind just made: the target is opened again, and must be the new mount's root.
   * The flags it has, which a remount must repeat, are read from the table in the words
   * remountOptions works in: only a bind with options (a read-only publish) pays that read.
   */
  private async remountBind(made: MountIds, target: MountTarget, options: readonly string[]): Promise<void> {
    const root = await pinTarget(target);
    try {
      const current = root.mountId === made.id ? mountsStackedAt(made.mountPoint).find((m) => m.id === made.id) : undefined;
      if (!current) throw failedPrecondition(`mount point ${target.path} changed while it was mounted`);
      const all = remountOptions(current.mountOptions, options);
      if (remountNatively(all, root, target)) return;
      await this.exec('mount', ['--no-canonicalize', '-o', ['remount', 'bind', ...all].join(','), '--', CHILD_FD_PATH], undefined, root.handle.fd);
    } finally {
      await root.handle.close();
    }
  }

  /**
   * Unmounts whatever is mounted at `target` until nothing is. A stale mount (ENOTCONN, ESTALE) is
   * forced and then detached lazily, as kubelet's own mounter does, rather than reported.
   */
  async unmountAll(target: string): Promise<void> {
    for (let guard = 0; guard < 16 && (await isMountPointAsync(target)); guard++) {
      // Not through a symlink put in its place: that one goes to umount(8), which says what it is.
      const native = nativeMount();
      if (native && (await unmountNatively(native, target))) continue;
      try {
        await this.exec('umount', ['--', target]);
      } catch (err) {
        if (!(err instanceof CommandError)) throw err;
        if (!(await isMountPointAsync(target))) return;
        if (/busy/i.test(err.result.stderr)) throw failedPrecondition(`${target} is busy: ${err.result.stderr.trim()}`);
        await this.exec('umount', ['-f', '-l', '--', target]);
      }
    }
  }

  /** What blkid finds on a device: its filesystem type and its partition table, each absent when there is none. */
  async probe(device: string): Promise<{ fsType?: string; partitionTable?: string }> {
    const r = await this.exec('blkid', ['-p', '-o', 'export', '--', device], [2]);
    const tag = (name: string) => (r.exitCode === 2 ? undefined : new RegExp(`^${name}=(.+)$`, 'm').exec(r.stdout)?.[1]?.trim() || undefined);
    return { ...(tag('TYPE') ? { fsType: tag('TYPE') } : {}), ...(tag('PTTYPE') ? { partitionTable: tag('PTTYPE') } : {}) };
  }

  /**
   * `fresh`: a new sparse image file, whose every unwritten block reads as zero, so mkfs.ext4 need not
   * zero the journal (lazy_journal_init): the image stays sparse (about 0.4 MiB of 64 MiB allocated,
   * not 4.4) and mkfs is quicker. A device found blank at stage may hold old bytes: zeroed in full.
   */
  async format(device: string, fsType: 'ext4' | 'xfs', fresh = false): Promise<void> {
    try {
      if (fsType === 'ext4') await this.exec('mkfs.ext4', ['-q', '-F', '-m', '0', ...(fresh ? ['-E', 'lazy_journal_init=1'] : []), '--', device]);
      else await this.exec('mkfs.xfs', ['-q', '--', device]);
    } catch (err) {
      // Since mkfs runs on the new image at create (shared/backends/block.ts populate), a full data
      // root fails there: said as every other full filesystem is (ResourceExhausted, the file, what to
      // do), not as an Internal error quoting mkfs (test/reliability/exhaustion.test.ts).
      throw (err instanceof CommandError && systemErrorInOutput(`${err.result.stderr}\n${err.result.stdout}`, 'write', device)) || err;
    }
  }

  /**
   * `fsck -a <device>`: checks the filesystem on an unmounted device, by its type (fsck(8) runs
   * fsck.<type>), and repairs what is safe to repair unattended. Answers fsck(8)'s exit code (a sum of
   * conditions: 1 errors corrected, 4 errors left uncorrected, 8 operational error) with the end of
   * what it said; the caller judges it. fsck reads an argument after `--` as an option for the checker,
   * so a device that could pass for an option is refused rather than guarded.
   */
  async fsck(device: string): Promise<{ exitCode: number; detail: string }> {
    if (!device.startsWith('/')) throw failedPrecondition(`fsck checks a device by its absolute path, and ${JSON.stringify(device.slice(0, 80))} is none`);
    try {
      const r = await this.exec('fsck', ['-a', device], [1]);
      return { exitCode: r.exitCode, detail: errorDetail(`${r.stdout}\n${r.stderr}`) };
    } catch (err) {
      if (err instanceof CommandError) return { exitCode: err.result.exitCode, detail: errorDetail(`${err.result.stdout}\n${err.result.stderr}`) };
      throw err;
    }
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

  /**
   * A loop device bound to the image until loopDetach: by the addon, else by losetup. `readOnly`: a
   * device that refuses writes (for a read-only raw block publish, shared/backends/block.ts).
   */
  async loopAttach(image: string, opts: { readOnly?: boolean } = {}): Promise<string> {
    const readOnly = opts.readOnly ?? false;
    const attached = loopAttachNatively(image, false, readOnly);
    if (attached) {
      attached.close();
      return attached.device;
    }
    try {
      const r = await this.exec('losetup', ['--find', '--show', ...(readOnly ? ['--read-only'] : []), '--', image]);
      return r.stdout.trim();
    } catch (err) {
      // Every loop device is bound (and the kernel makes no more): not twinvol's fault, and not final.
      if (err instanceof CommandError && /cannot find an unused loop device/.test(err.result.stderr))
        throw resourceExhausted(
          `no free loop device on this node for ${image} (losetup: cannot find an unused loop device); detach the ones no longer used (losetup --list names their files) or allow more (the loop module's max_loop), then retry`,
        );
      throw err;
    }
  }

  async loopDetach(device: string): Promise<void> {
    if (!loopIoctlNatively(device, 'LOOP_CLR_FD', nativeMount()?.loopDetach)) await this.exec('losetup', ['--detach', device]);
  }

  /** Makes the loop device see the new size of its grown image: by the addon, else by losetup. */
  async loopRefresh(device: string): Promise<void> {
    if (!loopIoctlNatively(device, 'LOOP_SET_CAPACITY', nativeMount()?.loopRefresh)) await this.exec('losetup', ['--set-capacity', device]);
  }

  /** Suspends writes to the filesystem mounted at `path` until thaw: a point in time for copies. */
  async freeze(path: string): Promise<void> {
    await this.exec('fsfreeze', ['--freeze', path]);
  }

  async thaw(path: string): Promise<void> {
    await this.exec('fsfreeze', ['--unfreeze', path]);
  }

  /** Sparse-aware copy; reflink where the filesystem can share extents. */
  async copySparse(from: string, to: string): Promise<void> {
    await this.copy(['--reflink=auto', '--sparse=always', '--', from, to], from, to);
  }

  async copyTree(from: string, to: string): Promise<void> {
    await this.copy(['-a', '--reflink=auto', '--sparse=always', '--', `${from}/.`, to], from, to);
  }

  /**
   * cp, whose running out of space (a clone, a restore, a snapshot into a full data root) is said as
   * a full filesystem is everywhere else (shared/errors.ts systemError): ResourceExhausted, the files
   * named, what to do. It was an Internal error quoting cp, which said neither that the disk was full
   * nor what to do about it (test/reliability/exhaustion.test.ts).
   */
  private async copy(args: readonly string[], from: string, to: string): Promise<void> {
    try {
      await this.exec('cp', args);
    } catch (err) {
      throw (err instanceof CommandError && systemErrorInOutput(err.result.stderr, 'copyfile', from, to)) || err;
    }
  }
}

export function describeMount(entry: MountEntry): string {
  return `${entry.source} (${entry.fsType}) at ${entry.mountPoint}`;
}
