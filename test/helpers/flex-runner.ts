import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { collect } from './collect.js';
import { goJson } from './go-json.js';

/** The two builds of the FlexVolume executable (scripts/build.mjs): the bundle run by node, and the single executable. */
export const FLEX_BUILDS = {
  bundle: resolve(import.meta.dirname, '../../dist/flex/twinvol'),
  sea: resolve(import.meta.dirname, '../../dist/sea/twinvol'),
} as const;
export type FlexBuild = keyof typeof FLEX_BUILDS;

/**
 * Which build the suites run: the bundle, or the single executable when TWINVOL_FLEX_BUILD=sea (set by
 * test/sea/use-sea.ts for the second pass of the key suites, or by hand for any flex suite). Read once,
 * when this module loads: every test file loads it afresh.
 */
export const FLEX_BUILD: FlexBuild = flexBuildFrom(process.env.TWINVOL_FLEX_BUILD);
export const FLEX_BIN = FLEX_BUILDS[FLEX_BUILD];
/** True in the single executable's pass: tests of the core alone, not of the executable, run once (in the bundle's pass). */
export const SEA_PASS = FLEX_BUILD === 'sea';

function flexBuildFrom(value: string | undefined): FlexBuild {
  if (value === undefined || value === '' || value === 'bundle') return 'bundle';
  if (value === 'sea') return 'sea';
  throw new Error(`TWINVOL_FLEX_BUILD=${JSON.stringify(value)}: expected bundle or sea`);
}

export interface FlexResult {
  exitCode: number;
  /** stdout and stderr together, as kubelet reads them. */
  output: string;
  reply: Record<string, unknown>;
}

/**
 * Runs the bundled executable the way kubelet does: a fresh process, argv as given, stdin closed,
 * cwd "/", a bare environment (a plain PATH, no HOME), stdout and stderr read as ONE document.
 * Throws if that document is not a single JSON object: that alone would fail a real kubelet call.
 * `bin`: another build of the executable (test/upgrade runs an older release's).
 */
export function runFlex(env: Record<string, string>, argv: readonly string[], bin = FLEX_BIN): Promise<FlexResult> {
  return new Promise((done, fail) => {
    const child = spawn(bin, [...argv], {
      cwd: '/',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: '/usr/bin:/bin', ...env },
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => {
      let reply: unknown;
      try {
        reply = JSON.parse(output);
      } catch {
        fail(new Error(`flex ${argv[0]} printed something that is not one JSON document: ${JSON.stringify(output)}`));
        return;
      }
      if (typeof reply !== 'object' || reply === null || Array.isArray(reply)) {
        fail(new Error(`flex ${argv[0]} replied with a non-object: ${output}`));
        return;
      }
      done({ exitCode: code ?? -1, output, reply: reply as Record<string, unknown> });
    });
  });
}

/** kubelet's base options for a volume, plus the PV's flexVolume.options. */
export function flexOptions(pvName: string, extra: Record<string, string> = {}, readwrite: 'rw' | 'ro' = 'rw'): string {
  return goJson({
    'kubernetes.io/fsType': '',
    'kubernetes.io/pvOrVolumeName': pvName,
    'kubernetes.io/readwrite': readwrite,
    ...extra,
  });
}

/** What kubelet sends after a restart, for volumes it reconstructed from the mount table. */
export function reconstructedOptions(pvName: string): string {
  return goJson({ 'kubernetes.io/fsType': '', 'kubernetes.io/pvOrVolumeName': pvName, 'kubernetes.io/readwrite': 'rw' });
}

/** The mount call's options: pod info, fsGroup, secrets (base64). */
export function mountOptions(pvName: string, pod: { uid: string; name: string }, extra: Record<string, string> = {}): string {
  return goJson({
    'kubernetes.io/fsType': '',
    'kubernetes.io/pod.name': pod.name,
    'kubernetes.io/pod.namespace': 'default',
    'kubernetes.io/pod.uid': pod.uid,
    'kubernetes.io/pvOrVolumeName': pvName,
    'kubernetes.io/readwrite': 'rw',
    'kubernetes.io/serviceAccount.name': 'default',
    ...extra,
  });
}

export function expectSuccess(r: FlexResult): FlexResult {
  if (r.reply.status !== 'Success' || r.exitCode !== 0)
    throw new Error(`expected Success/exit 0, got exit ${r.exitCode}: ${r.output}`);
  return r;
}

export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** The administrator's CLI (`twinvol volume ...`), which is human output, not the kubelet protocol. */
export function runCli(env: Record<string, string>, args: readonly string[]): Promise<CliResult> {
  return runAdmin(env, ['volume', ...args]);
}

/** Any command of the administrator's CLI (`twinvol node list`, `twinvol volume ...`). */
export async function runAdmin(env: Record<string, string>, args: readonly string[], bin = FLEX_BIN): Promise<CliResult> {
  const { code, stdout, stderr } = await collect(bin, args, { env: { PATH: '/usr/bin:/bin', ...env } });
  return { exitCode: code ?? -1, stdout, stderr };
}

/** The calls a FlexVolume suite makes, bound to whichever scratch world the current test uses (and to `bin`, the executable). */
export function flexSession(env: () => Record<string, string>, bin = FLEX_BIN) {
  const flex = (...argv: string[]) => runFlex(env(), argv, bin);
  return {
    flex,
    /** A call that must succeed. */
    ok: async (...argv: string[]) => expectSuccess(await flex(...argv)),
    /** The administrator's `twinvol volume create`, which must succeed quietly. */
    async createVolume(id: string, ...args: string[]): Promise<void> {
      const r = await runAdmin(env(), ['volume', 'create', id, ...args], bin);
      if (r.exitCode !== 0 || r.stderr !== '') throw new Error(`volume create ${id} failed (exit ${r.exitCode}): ${r.stderr}`);
    },
  };
}

export const podNamed = (uid: string) => ({ uid, name: `pod-${uid}` });
