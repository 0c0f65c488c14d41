import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FlexDrivers } from '../../shared/backends/exec-driver.js';
import { parseDriverName } from '../../shared/backends/exec.js';
import { observeSpawns, type SpawnRecord } from '../../shared/runner.js';
import { installDrivers, killLoggedPids, loggedPids, processGone, VENDOR } from './helpers.js';
import { eventually } from '../helpers/eventually.js';

/**
 * A third-party driver's run is a spawn like any tool's (shared/backends/exec-driver.ts): the CSI
 * server's command metrics and its debug line count and time it (csi/server.ts observes every spawn),
 * and the JSON options, where kubelet puts the PV's secrets, never reach them.
 */
describe('driver runs in the spawn log', () => {
  let root: string;
  let pluginDir: string;
  const seen: SpawnRecord[] = [];
  let stop: () => void;
  const drivers = (timeoutMs = 10_000) => new FlexDrivers({ pluginDir, timeoutMs, lenient: [], execIn: 'local' });

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'twinvol-spawnrec-'));
    pluginDir = join(root, 'plugins');
    installDrivers(pluginDir);
    stop = observeSpawns((r) => seen.push(r));
  });
  afterEach(() => {
    seen.length = 0;
  });
  afterAll(() => {
    stop?.();
    // A failed test must not leave the hang driver's sleep behind either.
    if (pluginDir) killLoggedPids(pluginDir);
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('init, a Failure and a Not supported: each recorded, failed only for the Failure, options withheld', async () => {
    const flex = drivers();
    const tmpfs = parseDriverName(`${VENDOR}/tmpfs`);
    const executable = join(pluginDir, `${VENDOR}~tmpfs`, 'tmpfs');
    const notMounted = join(root, 'not-mounted');
    mkdirSync(notMounted);
    await expect(flex.call(tmpfs, 'unmount', [notMounted])).rejects.toThrow(/umount .* failed/);
    const options = JSON.stringify({ 'kubernetes.io/secret/password': 'c2VjcmV0LXZhbHVl', 'kubernetes.io/fsType': 'ext4' });
    expect(await flex.call(tmpfs, 'attach', [options, 'node-a'], ['secret-value'])).toEqual({ supported: false });

    expect(seen.map((r) => ({ command: r.command, args: r.args, exitCode: r.exitCode, failed: r.failed }))).toEqual([
      { command: executable, args: ['init'], exitCode: 0, failed: false },
      { command: executable, args: ['unmount', notMounted], exitCode: 1, failed: true },
      { command: executable, args: ['attach', '<options>', 'node-a'], exitCode: 1, failed: false },
    ]);
    for (const r of seen) expect(r.durationMs).toBeGreaterThan(0);
    expect(JSON.stringify(seen)).not.toMatch(/c2VjcmV0|secret-value|fsType/);
  });

  it('a driver past its deadline is recorded as failed', async () => {
    const flex = drivers(1_000);
    const hang = parseDriverName(`${VENDOR}/hang`);
    const target = join(root, 'hang-target');
    await expect(flex.call(hang, 'mount', [target, '{}'])).rejects.toThrow(/did not answer within 1000 ms/);
    expect(seen.map((r) => ({ args: r.args, failed: r.failed }))).toEqual([
      { args: ['init'], failed: false },
      { args: ['mount', target, '<options>'], failed: true },
    ]);
    // What the hung driver started dies with its process group (shared/backends/exec-run.ts).
    const pids = loggedPids(pluginDir, 'hang');
    expect(pids.length).toBeGreaterThan(0);
    expect(await eventually(() => pids.every(processGone))).toBe(true);
  });
});
