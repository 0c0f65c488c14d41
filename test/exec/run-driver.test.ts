import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type DriverRunOptions, type DriverSpawner, runDriver } from '../../shared/backends/exec-run.js';
import { OUTPUT_CAP, signalQuietly } from '../../shared/runner.js';
import { builtAddon } from '../shared/built-addon.js';
import { eventually } from '../helpers/eventually.js';
import { processGone } from './helpers.js';

// kubelet's contract with a driver, as shared/backends/exec-run.ts keeps it, held against both ways
// it starts one: the addon's posix_spawn (the default where the addon can) and execa.

let dir: string;
beforeAll(() => {
  dir = mkdtempSync('/tmp/twinvol-test-run-driver-');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sh = (script: string, spawner: DriverSpawner, more: Partial<DriverRunOptions> = {}) =>
  runDriver('/bin/sh', ['-c', script], { timeoutMs: 10_000, graceMs: 2_000, spawner, ...more });


describe.each<DriverSpawner>(['posix_spawn', 'execa'])('a driver started by %s', (spawner) => {
  it('writes stdout and stderr to one output, in the order written, and answers its exit code', async () => {
    const r = await sh('echo one; echo two >&2; echo three; exit 3', spawner);
    expect(r).toMatchObject({ exitCode: 3, timedOut: false, output: 'one\ntwo\nthree\n' });
    expect(r.startError).toBeUndefined();
  });

  it('reads /dev/null for stdin, and leads a session and process group of its own, with no terminal', async () => {
    const r = await sh('readlink /proc/$$/fd/0; ps -o pgid=,sid=,tty= -p $$', spawner);
    const [stdin, ids] = r.output.trim().split('\n');
    expect(stdin).toBe('/dev/null');
    expect(ids?.trim().split(/\s+/)).toEqual([String(r.pid), String(r.pid), '?']);
  });

  it('starts with no signal blocked and SIGPIPE at its default, though Node ignores it', async () => {
    const r = await runDriver('grep', ['-E', '^Sig(Blk|Ign)', '/proc/self/status'], { timeoutMs: 10_000, graceMs: 2_000, spawner });
    const [blocked, ignored] = r.output.trim().split('\n').map((l) => BigInt(`0x${l.split('\t')[1]}`));
    expect(blocked).toBe(0n);
    expect((ignored ?? -1n) & (1n << 12n)).toBe(0n);
  });

  it('answers -1 for a driver a signal ended, and names the signal (once "unknown" through the addon)', async () => {
    expect(await sh('kill -KILL $$', spawner)).toMatchObject({ exitCode: -1, timedOut: false, signal: 'SIGKILL' });
    expect(await sh('kill -SEGV $$', spawner)).toMatchObject({ exitCode: -1, signal: 'SIGSEGV' });
    expect(await sh('exit 3', spawner)).not.toHaveProperty('signal');
  });

  it("gets this process's environment with the sbin directories on its PATH, or exactly the one given", async () => {
    vi.stubEnv('TWINVOL_TEST_DRIVER_ENV', 'inherited');
    try {
      const inherited = await sh('echo "$TWINVOL_TEST_DRIVER_ENV $PATH"', spawner);
      const [value, path] = inherited.output.trim().split(' ');
      expect(value).toBe('inherited');
      expect(path?.split(':')).toContain('/usr/sbin');
      const given = await runDriver('env', [], { timeoutMs: 10_000, graceMs: 2_000, spawner, env: { PATH: '/usr/bin:/bin', ONLY: 'this' } });
      expect(given.output.trim().split('\n').sort()).toEqual(['ONLY=this', 'PATH=/usr/bin:/bin']);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('runs a prefix before the driver, as `--flex-exec host` puts nsenter there', async () => {
    const r = await runDriver('/bin/sh', ['-c', 'echo "$WORD"'], { timeoutMs: 10_000, graceMs: 2_000, spawner, prefix: ['env', 'WORD=prefixed'] });
    expect(r.output).toBe('prefixed\n');
  });

  it('keeps the last OUTPUT_CAP bytes of the output, where a reply after megabytes of noise is, and says how many went before', async () => {
    const r = await sh(`head -c ${OUTPUT_CAP + 4096} /dev/zero | tr '\\0' a; echo '{"status":"Success"}'`, spawner);
    expect(r.exitCode).toBe(0);
    const reply = '{"status":"Success"}\n';
    expect(r.output.startsWith(`... (${4096 + reply.length} bytes left out)\n`)).toBe(true);
    expect(r.output.endsWith(`aaaa${reply}`)).toBe(true);
    expect(r.output.length).toBe(OUTPUT_CAP + `... (${4096 + reply.length} bytes left out)\n`.length);
  });

  it('names why a driver could not be started: none there, or not executable', async () => {
    const missing = await runDriver(join(dir, 'absent'), ['init'], { timeoutMs: 10_000, graceMs: 2_000, spawner });
    expect(missing).toMatchObject({ exitCode: -1, timedOut: false, startError: expect.stringContaining('ENOENT') });
    const plain = join(dir, `not-executable-${spawner}`);
    writeFileSync(plain, '#!/bin/sh\necho hi\n');
    chmodSync(plain, 0o644);
    const refused = await runDriver(plain, ['init'], { timeoutMs: 10_000, graceMs: 2_000, spawner });
    expect(refused).toMatchObject({ exitCode: -1, startError: expect.stringContaining('EACCES') });
  });

  it("passes an argument and an environment string of 100 KiB whole (options with a pod's secrets), and the kernel's refusal of one above 128 KiB", async () => {
    // kubelet hands a driver its options as one argument, secrets included: a certificate alone passes 4 KiB.
    const big = 'o'.repeat(100 * 1024);
    const r = await runDriver('/bin/sh', ['-c', 'echo ${#1} ${#BIG}', 'sh', big], { timeoutMs: 10_000, graceMs: 2_000, spawner, env: { PATH: '/usr/bin:/bin', BIG: big } });
    expect(r).toMatchObject({ exitCode: 0, output: `${big.length} ${big.length}\n` });
    // MAX_ARG_STRLEN (linux/binfmts.h): 32 pages a string, its NUL included.
    const over = await runDriver('/bin/echo', ['p'.repeat(128 * 1024)], { timeoutMs: 10_000, graceMs: 2_000, spawner });
    expect(over).toMatchObject({ exitCode: -1, timedOut: false, startError: expect.stringContaining('E2BIG') });
  });

  it('passes an environment of 5,000 variables, as a pod among some 700 Services has from their links', async () => {
    const env = Object.fromEntries([['PATH', '/usr/bin:/bin'], ...Array.from({ length: 4999 }, (_, i) => [`SVC_${i}_SERVICE_HOST`, '10.0.0.1'])]);
    const r = await runDriver('/bin/sh', ['-c', 'env | grep -c "^SVC_"'], { timeoutMs: 10_000, graceMs: 2_000, spawner, env });
    expect(r).toMatchObject({ exitCode: 0, output: '4999\n' });
  });

  it('answers at the exit, though a daemon it left still holds the output', async () => {
    const r = await sh('sleep 300 & echo started $!', spawner);
    try {
      expect(r).toMatchObject({ exitCode: 0, timedOut: false });
      const daemon = Number(r.output.trim().split(' ')[1]);
      expect(processGone(daemon)).toBe(false);
    } finally {
      // What the test left running in the driver's group: the daemon.
      if (r.pid !== undefined) signalQuietly(-r.pid, 'SIGKILL');
    }
  });

  it('at its deadline gets SIGTERM, then SIGKILL after the grace, and all it started is killed', async () => {
    const pids = join(dir, `pids-${spawner}`);
    const started = performance.now();
    try {
      const r = await sh(`trap "" TERM; sleep 300 & echo $$ $! > ${pids}; wait; wait`, spawner, { timeoutMs: 300, graceMs: 300 });
      expect(r).toMatchObject({ timedOut: true, exitCode: -1 });
      // Not before the grace: SIGTERM alone did not end it.
      expect(performance.now() - started).toBeGreaterThanOrEqual(550);
      const sleeper = Number(readFileSync(pids, 'utf8').split(' ')[1]);
      expect(await eventually(() => processGone(sleeper))).toBe(true);
    } finally {
      // Should a kill have been missed, the driver and its sleeper go with the test, not 300 s later.
      if (existsSync(pids)) for (const pid of readFileSync(pids, 'utf8').trim().split(' ').map(Number)) if (pid > 0) signalQuietly(pid, 'SIGKILL');
    }
  });

  it('ends at SIGTERM when the driver does', async () => {
    const r = await sh('sleep 300', spawner, { timeoutMs: 200, graceMs: 30_000 });
    // Whatever a missed kill left in the group goes with the test.
    if (r.pid !== undefined) signalQuietly(-r.pid, 'SIGKILL');
    expect(r).toMatchObject({ timedOut: true, exitCode: -1 });
    expect(r.durationMs).toBeLessThan(20_000);
  });
});

describe('a driver started by posix_spawn', () => {
  it('holds no descriptor of the server beyond 0, 1 and 2, not even one inherited without close-on-exec', async () => {
    // libuv, and so execa, closes only what is marked close-on-exec: a descriptor this process was
    // given without the mark (a test runner's pipe) reaches the driver. The native start closes all.
    const r = await sh('ls /proc/$$/fd', 'posix_spawn');
    expect(r.output.trim().split('\n')).toEqual(['0', '1', '2']);
  });
});

describe('which way a driver is started', () => {
  it("is posix_spawn where the addon can, and execa when asked or where it cannot", async () => {
    const spawn = builtAddon('spawnTool').spawnTool;
    const startDriver = vi.spyOn(spawn, 'startDriver');
    try {
      await runDriver('true', [], { timeoutMs: 10_000, graceMs: 2_000 });
      expect(startDriver).toHaveBeenCalledTimes(1);
      await runDriver('true', [], { timeoutMs: 10_000, graceMs: 2_000, spawner: 'execa' });
      expect(startDriver).toHaveBeenCalledTimes(1);
      const supported = vi.spyOn(spawn, 'supported').mockReturnValue(false);
      const fallback = await runDriver('true', [], { timeoutMs: 10_000, graceMs: 2_000 });
      expect(fallback).toMatchObject({ exitCode: 0, timedOut: false });
      expect(startDriver).toHaveBeenCalledTimes(1);
      await expect(runDriver('true', [], { timeoutMs: 10_000, graceMs: 2_000, spawner: 'posix_spawn' })).rejects.toThrow(/cannot start a driver/);
      supported.mockRestore();
    } finally {
      startDriver.mockRestore();
    }
  });
});
