import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, FLEX_BIN, runAdmin } from '../helpers/flex-runner.js';
import { eventually } from '../helpers/eventually.js';
import { createScratch, mountsUnder, type Scratch } from '../helpers/scratch.js';
import { killLeftBehind, processGone } from './helpers.js';

/**
 * `twinvol flex check` (flex/check.ts) against drivers kubelet would not run, or whose lifecycle the
 * checker once judged too kindly: each written here as a small /bin/sh script in kubelet's
 * <vendor>~<name>/<name> layout. test/exec/check.test.ts covers the shared test drivers.
 */

interface Report {
  steps: { step: string; result: 'pass' | 'quirk' | 'fail' | 'skipped'; detail: string; quirks: { kind: string; detail: string }[] }[];
  verdict: { kind: 'kubelet' | 'twinvol' | 'none'; settings: string[]; summary: string };
}

const VENDOR = 'probe';
const NOT_SUPPORTED = `*) echo '{"status":"Not supported"}'; exit 1 ;;`;
const DRIVERS: Record<string, string> = {
  initns: `case "$1" in
${NOT_SUPPORTED}
esac`,
  initempty: `case "$1" in
init) ;;
${NOT_SUPPORTED}
esac`,
  // Not attachable, so kubelet has no device mount to bind from when mount is Not supported.
  mountns: `case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":false}}' ;;
${NOT_SUPPORTED}
esac`,
  // attach is not idempotent: the repeat fails while the first left the volume attached.
  attachonce: `here=$(dirname "$0")
case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":true}}' ;;
attach) if [ -e "$here/attached" ]; then echo '{"status":"Failure","message":"already attached"}'; exit 1; fi
  touch "$here/attached"; echo '{"status":"Success","device":"/dev/null"}' ;;
detach) rm -f "$here/attached"; echo detach >> "$here/detached.log"; echo '{"status":"Success"}' ;;
${NOT_SUPPORTED}
esac`,
  // Well behaved; checked by its bare name from its own directory, not on the PATH.
  bare: `case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":false}}' ;;
mount) mountpoint -q "$2" || mount -t tmpfs -o size=1m tmpfs "$2"; echo '{"status":"Success"}' ;;
unmount) ! mountpoint -q "$2" || umount "$2"; echo '{"status":"Success"}' ;;
${NOT_SUPPORTED}
esac`,
  // Prints Success, then dies of a signal: kubelet sees an exec error, the lenient reader the reply.
  sigkill: `case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":false}}'; kill -KILL $$ ;;
${NOT_SUPPORTED}
esac`,
  // Mounts, then hangs in unmount: the check is interrupted with a mount in place and a driver running.
  slowunmount: `here=$(dirname "$0")
case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":false}}' ;;
mount) mountpoint -q "$2" || mount -t tmpfs -o size=1m tmpfs "$2"; echo '{"status":"Success"}' ;;
unmount) echo $$ > "$here/unmount.pid"; sleep 60; echo '{"status":"Success"}' ;;
${NOT_SUPPORTED}
esac`,
  // Its mount leaves a daemon in a session of its own (a double fork, setsid) holding the call's output.
  escaper: `here=$(dirname "$0")
case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":false}}' ;;
mount) mountpoint -q "$2" || mount -t tmpfs -o size=1m tmpfs "$2"
  (setsid sleep 300 & echo $! >> "$here/pids.log")
  echo '{"status":"Success"}' ;;
unmount) ! mountpoint -q "$2" || umount "$2"; echo '{"status":"Success"}' ;;
${NOT_SUPPORTED}
esac`,
};

let s: Scratch;
const driverPath = (name: string) => join(s.root, 'plugins', `${VENDOR}~${name}`, name);
const env = () => ({ ...s.env, TMPDIR: s.root });
const check = (file: string, ...args: string[]): Promise<CliResult> => runAdmin(env(), ['flex', 'check', file, '--json', ...args]);

function reportOf(r: CliResult): Report {
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as Report;
}

beforeAll(() => {
  s = createScratch(hostname());
  for (const [name, body] of Object.entries(DRIVERS)) {
    mkdirSync(join(s.root, 'plugins', `${VENDOR}~${name}`), { recursive: true });
    writeFileSync(driverPath(name), `#!/bin/sh\n${body}\n`);
    chmodSync(driverPath(name), 0o755);
  }
});

afterAll(() => {
  if (!s) return;
  // Should the checker fail to, the escaper's daemons are killed here.
  for (const pid of escaperPids()) killLeftBehind(pid, join(s.root, 'plugins'));
  s.cleanup();
});

function escaperPids(): number[] {
  const log = join(s.root, 'plugins', `${VENDOR}~escaper`, 'pids.log');
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map(Number) : [];
}

describe('twinvol flex check: an init that is not Success', () => {
  it.each([
    ['answers Not supported', 'initns'],
    ['prints nothing', 'initempty'],
  ])('%s: init fails, no lifecycle is tried, the driver does not run', async (_what, name) => {
    const r = await check(driverPath(name));
    const report = reportOf(r);
    expect(r.exitCode).toBe(1);
    expect(report.steps.map((st) => [st.step, st.result])).toEqual([['init', 'fail']]);
    expect(report.steps[0]?.quirks.map((q) => q.kind)).toContain('init-not-success');
    expect(report.verdict.kind).toBe('none');
  });
});

describe('twinvol flex check: a mount kubelet would fail', () => {
  it('a driver that is not attachable and answers Not supported to mount: mount fails, nothing mounted', async () => {
    const r = await check(driverPath('mountns'));
    const report = reportOf(r);
    expect(r.exitCode).toBe(1);
    const mount = report.steps.find((st) => st.step === 'mount #1');
    expect(mount?.result).toBe('fail');
    expect(mount?.quirks.map((q) => q.detail).join()).toContain('nothing is mounted at');
    expect(report.steps.map((st) => st.step)).not.toContain('unmount #1');
    expect(report.verdict.kind).toBe('none');
  });
});

describe('twinvol flex check: a driver left attached', () => {
  it('an attach that fails when repeated: the check fails and cleanup still detaches', async () => {
    const r = await check(driverPath('attachonce'), '--attachable');
    const report = reportOf(r);
    expect(r.exitCode).toBe(1);
    expect(report.steps.find((st) => st.step === 'attach #2')?.result).toBe('fail');
    const dir = join(s.root, 'plugins', `${VENDOR}~attachonce`);
    expect(existsSync(join(dir, 'attached'))).toBe(false);
    expect(readFileSync(join(dir, 'detached.log'), 'utf8')).toBe('detach\n');
  });
});

describe('twinvol flex check: the driver named on the command line', () => {
  it('a bare file name is the file in the current directory, not a program on the PATH', async () => {
    const dir = join(s.root, 'plugins', `${VENDOR}~bare`);
    const r = await new Promise<CliResult>((done) => {
      execFile(FLEX_BIN, ['flex', 'check', 'bare', '--json'], { cwd: dir, env: { PATH: '/usr/bin:/bin', ...env() } }, (err, stdout, stderr) => {
        const code = err && typeof err.code === 'number' ? err.code : 0;
        done({ exitCode: code, stdout, stderr });
      });
    });
    const report = reportOf(r);
    expect(report.steps.find((st) => st.step === 'init')?.result).toBe('pass');
    expect(report.verdict.kind).toBe('kubelet');
    expect(r.exitCode).toBe(0);
  });
});

describe('twinvol flex check: a driver a signal ended', () => {
  it('after printing Success: named as killed by a signal, not as stderr noise', async () => {
    const report = reportOf(await check(driverPath('sigkill')));
    const init = report.steps.find((st) => st.step === 'init');
    expect(init?.result).toBe('quirk');
    expect(init?.quirks.map((q) => q.kind)).toEqual(['killed-by-signal']);
    expect(init?.quirks[0]?.detail).toMatch(/^killed by SIGKILL after printing Success/);
  });
});

describe('twinvol flex check: interrupted', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)('%s mid-run: the driver killed, nothing left mounted, the scratch dir gone, exit 1', async (signal) => {
    const dir = join(s.root, 'plugins', `${VENDOR}~slowunmount`);
    const pidFile = join(dir, 'unmount.pid');
    rmSync(pidFile, { force: true });
    const child = spawn(FLEX_BIN, ['flex', 'check', driverPath('slowunmount')], { env: { PATH: '/usr/bin:/bin', ...env() }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((done) => child.on('close', (code) => done(code)));
    try {
      expect(await eventually(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'))).toBe(true);
      expect(mountsUnder(s.root).length).toBeGreaterThan(0);
      child.kill(signal);
      expect(await exited).toBe(1);
    } finally {
      child.kill('SIGKILL');
    }
    expect(stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(stderr).toContain(`interrupted by ${signal}`);
    const driverPid = Number(readFileSync(pidFile, 'utf8'));
    expect(await eventually(() => processGone(driverPid))).toBe(true);
    expect(mountsUnder(s.root)).toEqual([]);
    expect(readdirSync(s.root).filter((n) => n.startsWith('twinvol-check-'))).toEqual([]);
  });
});

describe('twinvol flex check: a daemon that left the driver\'s process group', () => {
  it('is found by the output file it holds, named, and killed at the end', async () => {
    const report = reportOf(await check(driverPath('escaper')));
    const mount = report.steps.find((st) => st.step === 'mount #1');
    expect(mount?.quirks.map((q) => q.kind)).toContain('leftover-processes');
    const pids = escaperPids();
    expect(pids).toHaveLength(2);
    expect(await eventually(() => pids.every(processGone))).toBe(true);
  });
});

describe('twinvol flex check: what it leaves behind', () => {
  it('no mount and no scratch dir', () => {
    expect(mountsUnder(s.root)).toEqual([]);
    expect(readdirSync(s.root).filter((n) => n.startsWith('twinvol-check-'))).toEqual([]);
  });
});
