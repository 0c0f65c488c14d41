import { existsSync } from 'node:fs';
import { realTool, wrappedTool, type WrappedTool } from '../../test/helpers/tool-wrapper.js';

/**
 * Every tool twinvol runs (shared/mounter.ts runs each by its bare name through shared/runner.ts, whose
 * PATH starts with the caller's; csi/tools.ts lists what each side needs).
 */
export const TWINVOL_TOOLS = ['mount', 'umount', 'losetup', 'blkid', 'mkfs.ext4', 'mkfs.xfs', 'e2fsck', 'resize2fs', 'xfs_growfs', 'fsfreeze', 'cp'] as const;

/**
 * Counts the tools both models run, the same way for both: a stand-in for each tool first on the PATH
 * of the FlexVolume executable and of the CSI server records its name and execs the real one
 * (test/helpers/tool-wrapper.ts). The CSI server logs no spawns of its own, so this is the one count
 * that is alike for the two; the FlexVolume executable's own log line (its `spawns`) is read too, and
 * must agree with it. The price, one `sh` per tool run, is paid by both models alike. What a tool runs in
 * turn (mount's /sbin/mount.<type> helpers) is not counted, by either.
 */
export class ToolCounter {
  private readonly wrapped: { tool: string; w: WrappedTool }[];
  private seen = new Map<string, number>();

  constructor(root: string) {
    this.wrapped = TWINVOL_TOOLS.filter(installed).map((tool) => ({ tool, w: wrappedTool(root, tool) }));
    this.take();
  }

  /** The directories to put first on a PATH. */
  get path(): string {
    return this.wrapped.map((x) => x.w.dir).join(':');
  }

  /** The tools run since the last take, one name per run (in tool order: runs of different tools interleave unseen). */
  take(): string[] {
    const out: string[] = [];
    for (const { tool, w } of this.wrapped) {
      const total = w.calls().length;
      for (let i = this.seen.get(tool) ?? 0; i < total; i++) out.push(tool);
      this.seen.set(tool, total);
    }
    return out;
  }
}

function installed(tool: string): boolean {
  try {
    return existsSync(realTool(tool));
  } catch {
    return false;
  }
}
