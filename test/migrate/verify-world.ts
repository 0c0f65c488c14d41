import type { ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { type CsiScratch, createCsiScratch } from '../csi/helpers/scratch.js';
import { type CliResult, expectSuccess, flexOptions, mountOptions, podNamed, runAdmin, runFlex } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { loopsLeftUnder, mountsUnder } from '../helpers/scratch.js';

/**
 * One scratch world per suite for `twinvol migrate verify` (flex/migrate/verify.ts), run as the built
 * executable. afterAll kills any twinvol-csi the verify may have left (none should be: the suites
 * check that first) and releases every mount and loop device under the world.
 */
export function useVerifyWorld(): () => CsiScratch {
  let scratch: CsiScratch | undefined;
  beforeAll(() => {
    scratch = createCsiScratch('node-a');
  });
  afterAll(() => {
    if (!scratch) return;
    for (const pid of serversOf(scratch)) process.kill(pid, 'SIGKILL');
    scratch.cleanup();
  });
  return () => {
    if (!scratch) throw new Error('the verify world is not set up');
    return scratch;
  };
}

/** `twinvol migrate verify ARGS` in the world, with further variables (TWINVOL_VERIFY_HOOK). */
export function verify(s: CsiScratch, args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runAdmin({ ...s.env, ...env }, ['migrate', 'verify', ...args]);
}

export interface VerifyJson {
  verdict: 'match' | 'mismatch' | 'failed';
  /** The endpoint given, or the private server started. */
  csi: string;
  error?: string;
  sums: Record<'flex' | 'csi' | 'rollback', { tree: { digest: string; entries: number; bytes: number }; device?: { digest: string; bytes: number } } | undefined>;
  differences: { csi: string[]; rollback: string[] };
  steps: { model: string; call: string; outcome: string }[];
}

export function parseReport(r: CliResult): VerifyJson {
  expect(r.stderr, 'a --json verify prints nothing on stderr').toBe('');
  return JSON.parse(r.stdout) as VerifyJson;
}

/**
 * What a verify must never leave: a mount or loop device under the world, a twinvol-csi serving it, a
 * scratch kubelet dir of its own.
 */
export async function leftovers(s: CsiScratch): Promise<string[]> {
  const scratchDirs = readdirSync(s.kubeletDir).filter((n) => n.startsWith('.twinvol-verify-'));
  return [...mountsUnder(s.root).map((m) => `mount ${m}`), ...(await loopsLeftUnder(s.root)).map((l) => `loop ${l}`), ...serversOf(s).map((p) => `twinvol-csi pid ${p}`), ...scratchDirs.map((d) => `dir ${d}`)];
}

/** twinvol-csi processes started on this world's data root. */
function serversOf(s: CsiScratch): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => a.endsWith('twinvol-csi')) && argv.includes(s.dataRoot)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/**
 * A pod's life under FlexVolume, read-write, as kubelet runs twinvol (attach ... detach), with
 * `write` given the pod's directory in between: how data gets onto a volume before a migration.
 */
export async function writeUnderFlex(s: CsiScratch, volumeId: string, write: (dir: string) => void): Promise<void> {
  const pv = `pv-${volumeId}`;
  const ok = async (...argv: string[]) => expectSuccess(await runFlex(s.env, argv));
  const opts = flexOptions(pv, { volumeId });
  await ok('attach', opts, 'node-a');
  const device = String((await ok('waitforattach', '', opts)).reply.device ?? '');
  const global = deviceMountPath(s.kubeletDir, pv);
  await ok('mountdevice', global, device, opts);
  const dir = podVolumeDir(s.kubeletDir, 'writer-uid', pv);
  await ok('mount', dir, mountOptions(pv, podNamed('writer-uid'), { volumeId }));
  try {
    write(dir);
  } finally {
    await ok('unmount', dir);
    await ok('unmountdevice', global);
    await ok('detach', pv, 'node-a');
  }
}

/**
 * Files a migration must carry over exactly: nested directories, modes with setgid and sticky bits,
 * owners other than root, a symlink (dangling too), an empty file, a 1 MiB binary file whose bytes are
 * a fixed function of their offset (no randomness: the same tree every run).
 */
export function writeRichTree(dir: string, tag: string): void {
  mkdirSync(join(dir, 'app/conf.d'), { recursive: true });
  writeFileSync(join(dir, 'app/conf.d/main.conf'), `tag=${tag}\n`);
  chmodSync(join(dir, 'app/conf.d/main.conf'), 0o640);
  chownSync(join(dir, 'app/conf.d/main.conf'), 1234, 5678);
  chmodSync(join(dir, 'app'), 0o2775);
  mkdirSync(join(dir, 'tmp'));
  chmodSync(join(dir, 'tmp'), 0o1777);
  writeFileSync(join(dir, 'empty'), '');
  const blob = Buffer.alloc(2 ** 20);
  for (let i = 0; i < blob.length; i++) blob[i] = (i * 31 + (i >> 9)) & 0xff;
  writeFileSync(join(dir, 'app/blob.bin'), blob);
  chmodSync(join(dir, 'app/blob.bin'), 0o600);
  symlinkSync('conf.d/main.conf', join(dir, 'app/current'));
  symlinkSync('/nonexistent/target', join(dir, 'dangling'));
}

/**
 * A verify still running when its test ended (it timed out, or threw first) is killed before the
 * world's clean-up, which would otherwise release what the verify still holds.
 */
export async function killIfRunning(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((done) => child.once('close', done));
  child.kill('SIGKILL');
  await gone;
}
