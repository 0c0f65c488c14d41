import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, FLEX_BIN, runAdmin } from '../helpers/flex-runner.js';
import { createScratch, loopsLeftUnder, mountsUnder, type Scratch } from '../helpers/scratch.js';
import { installDrivers, killLeftBehind, processGone, VENDOR } from './helpers.js';
import { eventually } from '../helpers/eventually.js';

/**
 * `twinvol flex check` (flex/check.ts) against every test driver (test/exec/drivers/), two drivers
 * written here for what those never do (no JSON at all; an unmount that leaves the mount), and
 * twinvol's own FlexVolume executable: the built dist/flex/twinvol, as an operator runs it. Each
 * driver's verdict, quirks and exit code are what the exec backend's quirks suite
 * (test/exec/quirks.test.ts) shows the CSI server making of the same driver.
 */

/** What the checker prints with --json (flex/check.ts runCheck, flex/check-report.ts). */
interface Report {
  driver: string;
  attachable: boolean;
  steps: { step: string; result: 'pass' | 'quirk' | 'fail' | 'skipped'; detail: string; quirks: { kind: string; detail: string }[] }[];
  verdict: { kind: 'kubelet' | 'twinvol' | 'none'; settings: string[]; summary: string };
}

interface Expected {
  exit: 0 | 1;
  verdict: Report['verdict']['kind'];
  settings?: string[];
  quirks: string[];
  attachable?: boolean;
  args?: string[];
}

// The deadline the hang driver passes; every other driver answers well within it.
const HANG_TIMEOUT = ['--timeout-ms', '1500'];
const LENIENT = (name: string) => ['--flex-lenient', `${VENDOR}/${name}`];
const EXPECTED: Record<string, Expected> = {
  // Well behaved, but a repeated unmount of an unmounted path fails: harmless where kubelet and twinvol check first.
  tmpfs: { exit: 0, verdict: 'kubelet', quirks: ['not-idempotent'] },
  noise: { exit: 1, verdict: 'twinvol', settings: LENIENT('noise'), quirks: ['not-idempotent', 'stderr-noise'] },
  exit1: { exit: 1, verdict: 'twinvol', settings: LENIENT('exit1'), quirks: ['exit-code-mismatch', 'not-idempotent'] },
  // kubelet's SetUpAt and twinvol's NodePublishVolume both look at the mount table before `mount`.
  stack: { exit: 0, verdict: 'kubelet', quirks: ['stacked-mount'] },
  hang: { exit: 1, verdict: 'none', quirks: ['no-reply'], args: HANG_TIMEOUT },
  // kubelet's CombinedOutput waits for the pipe the daemon holds; twinvol's runner reads a file.
  daemon: { exit: 1, verdict: 'twinvol', settings: [], quirks: ['leftover-processes', 'not-idempotent'] },
  loop: { exit: 0, verdict: 'kubelet', quirks: ['not-idempotent'], attachable: true },
  loopempty: { exit: 1, verdict: 'twinvol', settings: LENIENT('loopempty'), quirks: ['missing-not-supported', 'not-idempotent'], attachable: true },
  loopresize: { exit: 0, verdict: 'kubelet', quirks: ['not-idempotent'], attachable: true },
  nonjson: { exit: 1, verdict: 'none', quirks: ['non-json'] },
  leaky: { exit: 1, verdict: 'none', quirks: ['leftover-mounts'] },
};

/** Drivers for what the shared ones never do, in the same shape as test/exec/drivers/tmpfs.sh. */
const EXTRA_DRIVERS: Record<string, string> = {
  nonjson: `#!/bin/bash
case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":false}}' ;;
mount) echo "mounted OK" ;;
*) echo '{"status":"Not supported"}'; exit 1 ;;
esac
`,
  leaky: `#!/bin/bash
case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":false}}' ;;
mount) mountpoint -q "$2" || mount -t tmpfs -o size=1m tmpfs "$2"; echo '{"status":"Success"}' ;;
unmount) echo '{"status":"Success"}' ;;
*) echo '{"status":"Not supported"}'; exit 1 ;;
esac
`,
};

// A driver whose refusal quotes the password, the token and its options (the secret in base64), as
// one that quotes what the server refused, or its argv, does.
EXTRA_DRIVERS.echoer = `#!/bin/bash
case "$1" in
init) echo '{"status":"Success","capabilities":{"attach":false}}' ;;
mount) pw=$(printf '%s' "$3" | jq -r '."kubernetes.io/secret/password"' | base64 -d)
  token=$(printf '%s' "$3" | jq -r '.token // ""')
  jq -cn --arg m "login refused for password $pw, token $token; options $3" '{status: "Failure", message: $m}'; exit 1 ;;
*) echo '{"status":"Not supported"}'; exit 1 ;;
esac
`;

const STEPS_PLAIN = ['init', 'unknown verb #1', 'unknown verb #2', 'mount #1', 'mount #2', 'unmount #1', 'unmount #2', 'teardown'];
const STEPS_ATTACHABLE = ['init', 'unknown verb #1', 'unknown verb #2', ...['attach', 'waitforattach', 'mountdevice', 'mount', 'unmount', 'unmountdevice', 'detach'].flatMap((v) => [`${v} #1`, `${v} #2`]), 'teardown'];

let s: Scratch;
const pluginDir = () => join(s.root, 'plugins');
const driverPath = (name: string) => join(pluginDir(), `${VENDOR}~${name}`, name);
// TMPDIR: the checker's scratch kubelet dir goes under the world's kubelet dir, where twinvol's own
// executable accepts paths; the node is this host, as kubelet names it.
const env = () => ({ ...s.env, TMPDIR: s.kubeletDir });
const check = (file: string, ...args: string[]): Promise<CliResult> => runAdmin(env(), ['flex', 'check', file, ...args]);
const results = new Map<string, CliResult>();

function reportOf(r: CliResult | undefined): Report {
  if (!r) throw new Error('no result');
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as Report;
}

beforeAll(async () => {
  s = createScratch(hostname());
  installDrivers(pluginDir());
  for (const [name, text] of Object.entries(EXTRA_DRIVERS)) {
    mkdirSync(join(pluginDir(), `${VENDOR}~${name}`), { recursive: true });
    writeFileSync(driverPath(name), text);
    chmodSync(driverPath(name), 0o755);
  }
  // One image per loop driver: they run at the same time, and attach finds its device by image.
  const runs = Object.entries(EXPECTED).map(async ([name, e]) => {
    const image = join(s.root, `${name}.img`);
    writeFileSync(image, '');
    truncateSync(image, 32 * 2 ** 20);
    const args = [...(e.attachable ? ['--attachable', '--options', JSON.stringify({ image })] : []), ...(e.args ?? [])];
    results.set(name, await check(driverPath(name), '--json', ...args));
  });
  const own = (async () => {
    const created = await runAdmin(s.env, ['volume', 'create', 'checked', '--size', '32Mi']);
    if (created.exitCode !== 0) throw new Error(`volume create failed: ${created.stderr}`);
    results.set('twinvol', await check(FLEX_BIN, '--attachable', '--json', '--options', JSON.stringify({ volumeId: 'checked' })));
  })();
  await Promise.all([...runs, own]);
}, 60_000);

afterAll(() => {
  if (!s) return;
  // Should the checker fail to, what the hang and daemon drivers left running is killed here.
  for (const pid of loggedPids()) killLeftBehind(pid, pluginDir());
  s.cleanup();
});

/** Pids the hang and daemon drivers logged of what they leave running (test/exec/drivers/tmpfs.sh). */
function loggedPids(): number[] {
  return ['hang', 'daemon'].flatMap((n) => {
    const log = join(pluginDir(), `${VENDOR}~${n}`, 'pids.log');
    return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map(Number) : [];
  });
}

describe('twinvol flex check: each test driver', () => {
  it.each(Object.entries(EXPECTED))('%s', (name, e) => {
    const r = results.get(name);
    const report = reportOf(r);
    expect(r?.exitCode).toBe(e.exit);
    expect(report.driver).toBe(`${VENDOR}/${name}`);
    expect(report.verdict.kind).toBe(e.verdict);
    if (e.settings) expect(report.verdict.settings).toEqual(e.settings);
    expect([...new Set(report.steps.flatMap((st) => st.quirks.map((q) => q.kind)))].sort()).toEqual(e.quirks);
    expect(report.attachable).toBe(e.attachable ?? false);
    // A driver that fails stops the lifecycle at that step; the others run every step twice.
    if (e.verdict !== 'none' || name === 'leaky') expect(report.steps.map((st) => st.step)).toEqual(e.attachable ? STEPS_ATTACHABLE : STEPS_PLAIN);
    expect(report.steps.every((st) => (st.quirks.length === 0) === (st.result === 'pass'))).toBe(true);
  });

  it("twinvol's own FlexVolume executable passes as attachable, every step clean", () => {
    const r = results.get('twinvol');
    const report = reportOf(r);
    expect(r?.exitCode).toBe(0);
    expect(report.attachable).toBe(true);
    expect(report.steps.map((st) => [st.step, st.result])).toEqual(STEPS_ATTACHABLE.map((st) => [st, 'pass']));
    expect(report.verdict).toEqual({ kind: 'kubelet', settings: [], summary: 'runs under kubelet as it is' });
  });

  it('leaves no mount, loop device, scratch dir or driver process behind', async () => {
    expect(mountsUnder(s.root)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    expect(readdirSync(s.kubeletDir).filter((n) => n.startsWith('twinvol-check-'))).toEqual([]);
    const logged = loggedPids();
    expect(logged.length).toBeGreaterThanOrEqual(4);
    expect(await eventually(() => logged.every(processGone))).toBe(true);
    expect(await eventually(() => driverProcesses().length === 0)).toBe(true);
  });
});

describe('twinvol flex check: the report and the command line', () => {
  it('prints one line per step and the verdict', async () => {
    const r = await check(driverPath('noise'));
    expect(r.exitCode).toBe(1);
    const lines = r.stdout.trimEnd().split('\n').filter((l) => !l.startsWith(' '));
    expect(lines.map((l) => l.split(/\s{2,}/)[0])).toEqual([...STEPS_PLAIN, 'verdict: does not run under kubelet as it is (stderr-noise); runs behind twinvol\'s CSI server with --flex-lenient acme/noise']);
    expect(lines[3]).toMatch(/^mount #1\s+quirk\s/);
  });

  it("a driver that echoes the secrets of --options: the report, plain and --json, holds neither form", async () => {
    const secret = 'S3CR3T-7c2a-MUST-NOT-LEAK';
    const base64 = Buffer.from(secret).toString('base64');
    // And a token written inline in the PV's options, which kubelet passes as it is.
    const inline = 'inline-7c2a-MUST-NOT-LEAK';
    const options = ['--options', JSON.stringify({ 'kubernetes.io/secret/password': base64, token: inline })];
    const [plain, json] = await Promise.all([check(driverPath('echoer'), ...options), check(driverPath('echoer'), '--json', ...options)]);
    const report = reportOf(json);
    expect(report.steps.find((st) => st.step === 'mount #1')).toMatchObject({ result: 'fail', detail: expect.stringContaining('login refused for password [redacted], token [redacted]') });
    expect(plain.stdout).toContain('login refused for password [redacted], token [redacted]');
    for (const r of [plain, json]) for (const form of [secret, base64, inline]) expect(`${r.stdout}${r.stderr}`).not.toContain(form);
  });

  it('--attachable for a driver whose init does not report attach: a failed check, no lifecycle run', async () => {
    const report = reportOf(await check(driverPath('tmpfs'), '--attachable', '--json'));
    expect(report.steps.map((st) => [st.step, st.result])).toEqual([
      ['init', 'pass'],
      ['attachable', 'fail'],
    ]);
    expect(report.verdict.kind).toBe('none');
  });

  it.each([
    ['a driver file that does not exist', ['/nonexistent/driver'], 'driver file /nonexistent/driver does not exist'],
    ['--options that are not JSON', ['DRIVER', '--options', '{bad'], '--options is not valid JSON'],
    ['--options that are not strings', ['DRIVER', '--options', '{"size":1}'], '--options must be a JSON object of strings'],
    ['a --timeout-ms that is not a number', ['DRIVER', '--timeout-ms', 'soon'], '--timeout-ms must be a whole number'],
    // A Node timer fires after 1 ms past this: the driver's init was killed at once and judged broken.
    ['a --timeout-ms past what a timer holds', ['DRIVER', '--timeout-ms', '3000000000'], '--timeout-ms must be a whole number of milliseconds from 100 to 2147483647'],
    ['no driver at all', [], 'Not enough non-option arguments'],
  ])('%s: exit 2, one line, the driver never run', async (_what, args, message) => {
    const calls = join(pluginDir(), `${VENDOR}~tmpfs`, 'calls.log');
    const before = readFileSync(calls, 'utf8');
    const r = await runAdmin(env(), ['flex', 'check', ...args.map((a) => (a === 'DRIVER' ? driverPath('tmpfs') : a))]);
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain(message);
    expect(readFileSync(calls, 'utf8')).toBe(before);
  });
});

/** Live processes running a driver from this world's plugin dir (bash <path> ...). */
function driverProcesses(): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(pluginDir()) && !processGone(Number(entry))) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}
