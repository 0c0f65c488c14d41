import { copyFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CsiScratch } from './scratch.js';
import type { LaunchOptions } from './server.js';

/**
 * The servers the CSI conformance suites (test/csi/audit-*.test.ts) run against. `built-in`: the
 * server with its own backends. `exec`: the full circle, twinvol's own FlexVolume executable
 * (dist/flex/twinvol) as the one third-party driver of a server that fronts it alone (--backends exec
 * --flex-driver twinvol.io/twinvol), which must pass the suites for the capabilities it reports.
 * By default the exec flavour runs the cases marked `exec: 'fast'`; with TWINVOL_LONG=1 every case
 * whose needs it reports.
 */
export type FlavourName = 'built-in' | 'exec';

/** What a case needs of a server beyond the basics (create, attach, stage, publish, filesystems). */
/** volume-stats: NodeGetVolumeStats answers usage (a FlexVolume driver only with supportsMetrics, which twinvol's init leaves false). */
export type Need = 'snapshots' | 'group-snapshots' | 'raw-block' | 'listing' | 'dir-data' | 'block-backend' | 'inline' | 'volume-stats';

export interface CsiFlavour {
  name: FlavourName;
  /** Flags and environment for a server of this flavour in `s` (installing the driver first). */
  launch(s: CsiScratch, options: LaunchOptions): LaunchOptions;
  /** CreateVolume parameters for a volume of the built-in backend `backend` (default dir). */
  parameters(backend?: 'dir' | 'block', bytes?: number): Record<string, string>;
  /** What it offers of the needs above. */
  offers: readonly Need[];
  /** Where the FlexVolume driver is installed (exec only), to look for its processes after a suite. */
  pluginDir?(s: CsiScratch): string;
}

const LONG = process.env.TWINVOL_LONG === '1';
const FLEX_BIN = resolve(import.meta.dirname, '../../../dist/flex/twinvol');
export const CIRCLE_DRIVER = 'twinvol.io/twinvol';

export const BUILT_IN: CsiFlavour = {
  name: 'built-in',
  launch: (_s, options) => options,
  parameters: (backend = 'dir') => ({ backend }),
  offers: ['snapshots', 'group-snapshots', 'raw-block', 'listing', 'dir-data', 'block-backend', 'inline', 'volume-stats'],
};

/**
 * twinvol's FlexVolume executable, installed where the server looks for drivers, keeping its catalog
 * in a world of its own (the TWINVOL_* variables it inherits from the server, as a driver inherits
 * kubelet's environment) and mounting under the same kubelet dir. FlexVolume has no provisioning:
 * the PV's options make the driver create the volume on first attach (createIfMissing, size; its id
 * is the PV name kubelet passes, here the CSI volume id). Its default backend is block.
 */
export const EXEC_CIRCLE: CsiFlavour = {
  name: 'exec',
  launch(s, options) {
    const pluginDir = join(s.root, 'plugins');
    const dir = join(pluginDir, 'twinvol.io~twinvol');
    mkdirSync(dir, { recursive: true });
    copyFileSync(FLEX_BIN, join(dir, 'twinvol'));
    return {
      ...options,
      args: ['--flex-plugin-dir', pluginDir, '--backends', 'exec', '--flex-driver', CIRCLE_DRIVER, ...(options.args ?? [])],
      env: {
        TWINVOL_DATA_ROOT: join(s.root, 'flex-data'),
        TWINVOL_STATE_DIR: join(s.root, 'flex-state'),
        TWINVOL_KUBELET_DIR: s.kubeletDir,
        TWINVOL_NODE_NAME: options.nodeId ?? 'node-a',
        ...options.env,
      },
    };
  },
  parameters: (_backend, bytes = 16 * 2 ** 20) => ({ createIfMissing: 'true', size: String(bytes) }),
  offers: [],
  pluginDir: (s) => join(s.root, 'plugins'),
};

/** The flavours a suite runs against: both, always (the exec one with fewer cases unless TWINVOL_LONG=1). */
export function csiFlavours(): CsiFlavour[] {
  return [BUILT_IN, EXEC_CIRCLE];
}

export interface CaseSpec {
  /** What the case needs (see Need); a flavour that does not offer one skips it. */
  needs?: readonly Need[];
  /** The exec flavour runs it by default ('fast'), only under TWINVOL_LONG=1 ('long'), or never ('never': it tests the built-in backends' own data). */
  exec?: 'fast' | 'long' | 'never';
}

/** Whether a case runs against `flavour` in this run. */
export function runsOn(flavour: CsiFlavour, spec: CaseSpec = {}): boolean {
  if (!(spec.needs ?? []).every((n) => flavour.offers.includes(n))) return false;
  if (flavour.name === 'built-in') return true;
  const when = spec.exec ?? 'long';
  return when === 'fast' || (when === 'long' && LONG);
}

/**
 * Processes still running the driver installed under `pluginDir`, and zombie children of the server
 * (`serverPid`: a driver it never reaped): after a suite there must be none (issue 9). /proc is the truth.
 */
export function driverProcessesLeft(pluginDir: string, serverPid?: number): string[] {
  const left: string[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^[0-9]+$/.test(n))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      // A driver's path lies below the dir; the server names the dir itself (--flex-plugin-dir).
      if (cmdline.includes(`${pluginDir}/`)) left.push(`${pid} ${state} ${cmdline.trim()}`);
      else if (state === 'Z' && serverPid !== undefined && ppid === serverPid) left.push(`${pid} Z, a child of the server`);
    } catch {
      // gone while we looked
    }
  }
  return left;
}
