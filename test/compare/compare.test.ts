import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CompareReport, ModelStep } from '../../flex/compare/report.js';
import { STEPS } from '../../flex/compare/workload.js';
import { CSI_BIN } from '../csi/helpers/server.js';
import { runAdmin } from '../helpers/flex-runner.js';
import { loopsLeftUnder, mountsUnder, releaseUnder } from '../helpers/scratch.js';
import { failingTool } from '../helpers/tool-wrapper.js';

/**
 * `twinvol compare` run for real from the built executable: its private scratch world goes under the
 * TMPDIR it is given, so each test can see that nothing is left there afterwards. No timing is
 * asserted: the figures are checked for shape and the counts for what they must be.
 */
let tmp: string;
const run = (...args: string[]) => runAdmin({ TMPDIR: tmp }, ['compare', ...args]);

async function expectNothingLeft(): Promise<void> {
  expect(readdirSync(tmp)).toEqual([]);
  expect(mountsUnder(tmp)).toEqual([]);
  expect(await loopsLeftUnder(tmp)).toEqual([]);
}

const isCount = (n: unknown) => Number.isInteger(n) && (n as number) >= 0;

/** What must hold of one model's step in a run of `rounds` rounds. */
function checkModelStep(m: ModelStep, model: 'flex' | 'csi', rounds: number): void {
  if (!m.supported) {
    expect(m.note, 'an unsupported step says why').toMatch(/\w/);
    expect(m.latencyMs).toBeNull();
    return;
  }
  expect(m.calls.length).toBeGreaterThan(0);
  expect(m.latencyMs?.rounds).toHaveLength(rounds);
  for (const ms of m.latencyMs?.rounds ?? []) expect(ms).toBeGreaterThan(0);
  expect(m.processes).toHaveLength(rounds);
  for (const n of m.processes) {
    expect(isCount(n), `processes ${n}`).toBe(true);
    // Every FlexVolume call is a process of its own, whatever it runs.
    if (model === 'flex') expect(n).toBeGreaterThanOrEqual(m.calls.length);
  }
  for (const [tool, n] of Object.entries(m.tools)) {
    expect(tool).toMatch(/^[a-z0-9._]+$/);
    expect(Number.isInteger(n) && n > 0).toBe(true);
  }
}

/** A dir volume's report, checked whole (a block volume's stage, system calls alone, is checked in the --html case's table). */
function checkDirReport(report: CompareReport, rounds: number): CompareReport['backends'][number] {
  expect(report.command).toBe('twinvol compare');
  expect(report.rounds).toBe(rounds);
  expect(report.csiStartMs).toBeGreaterThan(0);
  expect(report.backends.map((b) => b.backend)).toEqual(['dir']);
  const b = report.backends[0];
  if (!b) throw new Error('no backend in the report');
  expect(b.steps.map((s) => s.step)).toEqual([...STEPS]);
  for (const s of b.steps) {
    checkModelStep(s.flex, 'flex', rounds);
    checkModelStep(s.csi, 'csi', rounds);
  }
  const step = (name: string) => b.steps.find((s) => s.step === name);
  // Both models do every step but stats, which FlexVolume has no call for.
  for (const s of b.steps) expect(s.csi.supported, `csi ${s.step}`).toBe(true);
  for (const s of b.steps) expect(s.flex.supported, `flex ${s.step}`).toBe(s.step !== 'stats');
  // A pod's mount is a bind, a system call in both models (shared/native-mount.ts): no tool, but listed,
  // from the FlexVolume log line and from the CSI server's debug log; so is the unmount.
  for (const model of ['flex', 'csi'] as const) {
    expect(step('publish')?.[model].tools.mount, model).toBeUndefined();
    expect(step('publish')?.[model].systemCalls, model).toEqual({ mount: rounds });
    expect(step('unpublish')?.[model].systemCalls, model).toEqual({ umount2: rounds });
    expect(step('attach')?.[model].systemCalls, model).toEqual({});
  }
  // kubelet's FlexVolume needs a mount point at the staging (a bind, for a dir volume); twinvol-csi stages
  // a dir volume by its record alone.
  expect(step('stage')?.csi.tools.mount).toBeUndefined();
  expect(b.flexLogAgrees).toBe(true);
  expect(b.differences).toEqual([]);
  // The compared state is real: both pods see a mount owned by the pod's fsGroup.
  for (const model of ['flex', 'csi'] as const) {
    expect(b.state?.[model].target.mount).not.toBeNull();
    expect(b.state?.[model].target.gid).toBe(2000);
  }
  return b;
}

beforeAll(() => {
  tmp = mkdtempSync('/tmp/twinvol-compare-test-');
});

afterAll(() => {
  releaseUnder(tmp);
});

describe('twinvol compare', () => {
  it('--backend dir --rounds 2 --json: every step for both models, counts, no difference, nothing left', async () => {
    const r = await run('--backend', 'dir', '--rounds', '2', '--json');
    expect(r.exitCode, r.stderr).toBe(0);
    // Not a terminal: no progress bar on stderr.
    expect(r.stderr).toBe('');
    const b = checkDirReport(JSON.parse(r.stdout) as CompareReport, 2);
    expect(b.state?.flex.target.mount?.device).toBe(b.state?.csi.target.mount?.device);
    expect(b.state?.flex.target.mount?.device).toContain('<volume>/data');
    await expectNothingLeft();
  });

  it('--backend block --rounds 1 --html F: a table, a self-contained page, a formatted loop device, nothing left', async () => {
    const page = join(mkdtempSync('/tmp/twinvol-compare-page-'), 'report.html');
    try {
      const r = await run('--backend', 'block', '--rounds', '1', '--html', page);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^block \(ext4, 64Mi/m);
      // Both stages bind a device (LOOP_CONFIGURE) and mount it as system calls, which run no process:
      // listed as such. FlexVolume's are two calls of the executable (waitforattach names the device).
      expect(r.stdout).toMatch(/^stage +flex +waitforattach, mountdevice .* 2 +ioctl\(2\) mount\(2\)$/m);
      expect(r.stdout).toMatch(/^ +csi +NodeStageVolume .* 0 +ioctl\(2\) mount\(2\)$/m);
      // FlexVolume's device outlives its mount (detach is a call of its own): unmountdevice lets it go.
      expect(r.stdout).toMatch(/^unstage +flex +unmountdevice .* umount2\(2\) ioctl\(2\)$/m);
      expect(r.stdout).toMatch(/^ +csi +NodeUnstageVolume .* 0 +umount2\(2\)$/m);
      expect(r.stdout).toContain('differences in the resulting state: none');
      expect(r.stdout).not.toContain('warning');
      const html = readFileSync(page, 'utf8');
      expect(html).toMatch(/^<!doctype html>/);
      expect(html).toContain('<svg');
      expect(html).toContain('NodeStageVolume');
      // Self-contained: nothing it would fetch or run.
      expect(html).not.toMatch(/<script|<link|<img|<iframe|\bsrc=|\bhref=|url\(|@import/i);
      await expectNothingLeft();
    } finally {
      releaseUnder(join(page, '..'));
    }
  });

  it("a TMPDIR with a single quote in it: the tool shims still run, exit 0, nothing left", async () => {
    // The shims' log lies under TMPDIR; pasted unescaped into sh, the quote broke every tool they stand for.
    const quoted = join(tmp, "it's here");
    mkdirSync(quoted);
    try {
      const r = await runAdmin({ TMPDIR: quoted }, ['compare', '--backend', 'block', '--rounds', '1', '--json']);
      expect(r.exitCode, r.stderr).toBe(0);
      const b = (JSON.parse(r.stdout) as CompareReport).backends[0];
      // resize2fs is a tool run through a shim in both models: counted, so the shims worked.
      const expand = b?.steps.find((s) => s.step === 'expand');
      expect(expand?.flex.tools.resize2fs).toBe(1);
      expect(expand?.csi.tools.resize2fs).toBe(1);
      expect(b?.flexLogAgrees).toBe(true);
      expect(readdirSync(quoted)).toEqual([]);
    } finally {
      releaseUnder(quoted);
    }
    await expectNothingLeft();
  });

  it.each([
    [['--backend', 'nfs'], /--backend must be one of dir, block, static, all/],
    [['--rounds', '0'], /--rounds must be a whole number from 1/],
    [['--rounds', '1.5'], /--rounds must be a whole number from 1/],
    [['--html', '/nonexistent-twinvol-dir/report.html'], /--html .* does not exist/],
    [['--html', '/tmp'], /--html "\/tmp" is a directory/],
    [['--html', '/tmp/'], /--html "\/tmp\/" is a directory/],
    [['--html', ''], /--html is given an empty value/],
    [['--csi-server', '/nonexistent-twinvol-csi'], /--csi-server .* is not an executable file/],
    [['--csi-server', '/tmp'], /--csi-server "\/tmp" is not an executable file/],
  ])('%j: exit 2, one line, nothing created', async (args, message) => {
    const r = await run(...args);
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    await expectNothingLeft();
    expect(existsSync('/nonexistent-twinvol-dir')).toBe(false);
  });

  it('a server that does not start: exit 1, one line, nothing left', async () => {
    const r = await run('--backend', 'static', '--rounds', '1', '--csi-server', '/bin/false');
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/^twinvol compare: twinvol-csi exited at start/);
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    await expectNothingLeft();
  });

  it('a failure with the CSI volume staged, published and on a loop device: exit 1, and still nothing left', async () => {
    // The real server, with an umount that fails (test/helpers/tool-wrapper.ts) first on its PATH, ahead
    // of compare's own: NodeUnpublishVolume fails with everything of the CSI round still set up.
    const fault = mkdtempSync('/tmp/twinvol-compare-fault-');
    try {
      const umount = failingTool(fault, 'umount', '--', 'umount: planted failure');
      const server = join(fault, 'twinvol-csi');
      // Without the mount addon, so that the unmount is umount(8)'s (shared/native-mount.ts).
      writeFileSync(server, `#!/bin/sh\nPATH='${umount.dir}':"$PATH" TWINVOL_NATIVE_MOUNT=off exec '${CSI_BIN}' "$@"\n`);
      chmodSync(server, 0o755);
      const r = await run('--backend', 'block', '--rounds', '1', '--csi-server', server);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toMatch(/^twinvol compare: NodeUnpublishVolume: INTERNAL: .*planted failure/);
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(umount.calls().length).toBeGreaterThan(0);
      await expectNothingLeft();
    } finally {
      releaseUnder(fault);
    }
  });
});
