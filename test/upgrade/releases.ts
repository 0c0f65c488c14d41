import { copyFileSync, cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { Inventory } from '../../shared/index.js';
import type { CsiScratch } from '../csi/helpers/scratch.js';
import { launchCsi, type RunningCsi } from '../csi/helpers/server.js';
import { runAdmin } from '../helpers/flex-runner.js';

/**
 * The releases a rolling-upgrade suite runs side by side: this checkout's `dist/` (the newer), and an
 * older release's `dist/`, built apart by scripts/old-release.mjs and named by TWINVOL_OLD_DIST (`npm
 * run test:long` builds and names it). Without it the suites skip, saying why.
 */
export interface Release {
  name: string;
  /** Whose executables these are (the addon beside them may be the other's). */
  executables: 'old' | 'new';
  flex: string;
  csi: string;
  /** The mount addon the executables load from beside themselves (shared/native-mount.ts). */
  addon: string;
}

function release(name: string, executables: Release['executables'], dist: string): Release {
  return { name, executables, flex: join(dist, 'flex/twinvol'), csi: join(dist, 'csi/twinvol-csi'), addon: join(dist, 'flex/twinvol-mount.node') };
}

const NEW_DIST = resolve(import.meta.dirname, '../../dist');
const OLD_DIST = process.env.TWINVOL_OLD_DIST ? resolve(process.env.TWINVOL_OLD_DIST) : undefined;

/** Why the upgrade suites skip, or undefined when they run. */
export const SKIP_WHY = OLD_DIST
  ? undefined
  : 'TWINVOL_OLD_DIST is not set: these suites run an older release beside this one; `npm run test:long` builds one (scripts/old-release.mjs)';

/**
 * Who makes and who tears down, by name: an upgrade, a rollback, and each release's executables beside
 * the other's mount addon (an upgrade that replaced one file and not the other; shared/native-mount.ts
 * parseAddon takes the calls an older addon lacks as absent).
 */
export const PAIRS = [
  ['old', 'new'],
  ['new', 'old'],
  ['old with the new addon', 'new with the old addon'],
  ['new with the old addon', 'old with the new addon'],
] as const;
export type ReleaseName = (typeof PAIRS)[number][number];

/**
 * The releases by name, the mixed ones copied into a directory of the suite's own (beforeAll) and
 * removed with it (afterAll). Outside a test, or when the suite skips, asking for one throws.
 */
export function useReleases(): (name: ReleaseName) => Release {
  let dir: string | undefined;
  const known = new Map<ReleaseName, Release>();
  beforeAll(() => {
    if (!OLD_DIST) return;
    for (const file of ['flex/twinvol', 'csi/twinvol-csi', 'flex/twinvol-mount.node'])
      if (!existsSync(join(OLD_DIST, file))) throw new Error(`TWINVOL_OLD_DIST=${OLD_DIST} has no ${file}: node scripts/old-release.mjs builds it`);
    const old = release('old', 'old', OLD_DIST);
    const now = release('new', 'new', NEW_DIST);
    dir = mkdtempSync('/tmp/twinvol-releases-');
    known.set('old', old).set('new', now);
    known.set('old with the new addon', mixed(old, now, dir)).set('new with the old addon', mixed(now, old, dir));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return (name) => {
    const found = known.get(name);
    if (!found) throw new Error(SKIP_WHY ?? `release ${name} is not set up (asked outside a test?)`);
    return found;
  };
}

/** `executables`' dist (FlexVolume, CSI) copied under `dir` with `addonOf`'s mount addon beside each. */
function mixed(executables: Release, addonOf: Release, dir: string): Release {
  const dist = join(dir, `${executables.name}-executables-${addonOf.name}-addon`);
  const from = resolve(executables.csi, '../..');
  for (const part of ['flex', 'csi']) {
    cpSync(join(from, part), join(dist, part), { recursive: true });
    copyFileSync(addonOf.addon, join(dist, part, 'twinvol-mount.node'));
  }
  copyFileSync(join(from, 'package.json'), join(dist, 'package.json'));
  return release(`${executables.name} with the ${addonOf.name} addon`, executables.executables, dist);
}

/** `twinvol status --json` of one release on a scratch world: its exit code, and each problem as "kind subject". */
export async function statusOf(r: Release, env: Record<string, string>): Promise<{ exitCode: number; problems: string[]; stderr: string }> {
  const out = await runAdmin(env, ['status', '--json'], r.flex);
  let problems: string[] = [];
  try {
    problems = (JSON.parse(out.stdout) as Inventory).problems.map((p) => `${p.kind} ${p.subject}`);
  } catch {
    problems = [`unreadable status output: ${out.stdout}`];
  }
  return { exitCode: out.exitCode, problems, stderr: out.stderr };
}

/** A suite's title, saying why it skips when it does (vitest names skipped suites, not their reasons). */
export const suiteTitle = (title: string): string => (SKIP_WHY ? `${title} (skipped: ${SKIP_WHY})` : title);

/**
 * One CSI server at a time on a test's scratch world: `serve` stops whichever runs and starts
 * `release`'s there, with `args` (further flags) added.
 */
export function csiServers(scratch: () => CsiScratch, args: () => string[] = () => []): { serve(release: Release): Promise<RunningCsi>; stop(): Promise<void> } {
  let running: RunningCsi | undefined;
  return {
    async serve(release) {
      await running?.stop();
      running = await launchCsi(scratch(), { command: [process.execPath, release.csi], args: args() });
      return running;
    },
    async stop() {
      await running?.stop();
      running = undefined;
    },
  };
}

/**
 * Whether this release moves a bind with flags into place with mount(8): new executables beside an
 * older addon, which has neither the one-step call (native/bind.c bindWithFlags) nor MS_MOVE, bind
 * and remount on a scratch point by the addon, then run `mount --move` (shared/bind-by-move.ts).
 */
export const movesWithTool = (r: Release): boolean => r.name === 'new with the old addon';

/** The private mount such a release keeps under the state dir for its scratch binds: it stays, by design. */
export const scratchParent = (stateDir: string): string => join(stateDir, 'binds');
