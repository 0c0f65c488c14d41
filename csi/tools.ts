import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { toolEnv } from '../shared/index.js';

/** What each side runs (see shared/mounter.ts). xfs tools are only needed for xfs volumes, so optional. */
const REQUIRED = {
  controller: ['cp'],
  node: ['mount', 'umount', 'losetup', 'blkid', 'fsck', 'mkfs.ext4', 'e2fsck', 'resize2fs'],
} as const;
const OPTIONAL = ['mkfs.xfs', 'xfs_growfs'];
/** Group snapshots freeze the filesystems staged on the controller's node; without it they cannot. */
const OPTIONAL_CONTROLLER = ['fsfreeze'];

export type Role = keyof typeof REQUIRED;

/** Every tool twinvol runs, each by its bare name through shared/runner.ts (`twinvol compare` counts them). */
export const ALL_TOOLS: readonly string[] = [...new Set([...REQUIRED.node, ...REQUIRED.controller, ...OPTIONAL, ...OPTIONAL_CONTROLLER])];

export interface ToolReport {
  missing: string[];
  missingOptional: string[];
}

/** Looks the tools up on the PATH the runner gives them, without spawning anything: Probe is called often. */
export function checkTools(roles: readonly Role[]): ToolReport {
  const dirs = (toolEnv().PATH ?? '').split(':').filter(Boolean);
  const found = (tool: string) =>
    dirs.some((dir) => {
      try {
        accessSync(join(dir, tool), constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
  const wanted = [...new Set(roles.flatMap((r) => REQUIRED[r]))];
  return {
    missing: wanted.filter((t) => !found(t)),
    missingOptional: [...(roles.includes('node') ? OPTIONAL : []), ...(roles.includes('controller') ? OPTIONAL_CONTROLLER : [])].filter((t) => !found(t)),
  };
}
