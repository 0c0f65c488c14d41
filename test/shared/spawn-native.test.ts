import { chmodSync, closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type NativeSpawn, parseAddon, setNativeMountPath, type ToolExit } from '../../shared/native-mount.js';
import { OUTPUT_CAP, run, type SpawnRequest, setSpawner, spawnHere } from '../../shared/runner.js';
import { runNatively, spawnNatively } from '../../shared/spawn-native.js';
import { addonExports, builtAddon } from './built-addon.js';

// The rules every spawner keeps are in test/shared/runner.test.ts, which runs this one among them.
// Here: what posix_spawn could get wrong that libuv's fork and exec get right, and the addon's edges.

let dir: string;
beforeEach(() => {
  dir = mkdtempSync('/tmp/twinvol-test-spawn-native-');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function addonSpawn(): NativeSpawn {
  const spawn = builtAddon('spawnTool').spawnTool;
  if (!spawn.supported()) throw new Error('pidfd_open(2) refused here: the native spawn needs Linux 5.3 and a seccomp profile that allows it');
  return spawn;
}

const request = (command: string, args: string[], more: Partial<SpawnRequest> = {}): SpawnRequest => ({
  command,
  args,
  timeoutMs: 10_000,
  env: { PATH: '/usr/bin:/bin' },
  outputCap: OUTPUT_CAP,
  ...more,
});

/** The addon's own answer to a start, and its exit when it started. */
function started(...args: Parameters<NativeSpawn['start']> extends [...infer A, unknown] ? A : never): { began: ReturnType<NativeSpawn['start']>; exit: Promise<ToolExit> } {
  let began: ReturnType<NativeSpawn['start']> = { errno: -1 };
  const exit = new Promise<ToolExit>((resolve) => {
    began = addonSpawn().start(...args, resolve);
  });
  return { began, exit };
}

describe('a tool started by posix_spawn', () => {
  it('starts with no signal blocked and none of the standard ones ignored, though Node ignores SIGPIPE', async () => {
    // The tool's own status: a shell's would show dash's mask while it vforks the next command.
    const r = await runNatively(addonSpawn(), request('grep', ['-E', '^Sig(Blk|Ign)', '/proc/self/status']));
    const [blocked, ignored] = r.stdout.split('\n').map((l) => BigInt(`0x${l.split('\t')[1]}`));
    expect(blocked).toBe(0n);
    // glibc's posix_spawn leaves its own two signals (32 and 33) ignored, which glibc sets again in
    // any program that uses them; signals 1 to 31, SIGPIPE (13) among them, are at their defaults.
    expect((ignored ?? -1n) & 0x7fffffffn).toBe(0n);
  });

  it('holds no descriptor of the server beyond 0, 1, 2 and the fd 3 it was given', async () => {
    const fd = openSync(join(dir, 'pinned'), 'w');
    try {
      const plain = await runNatively(addonSpawn(), request('sh', ['-c', 'ls /proc/$$/fd']));
      expect(plain.stdout.split('\n')).toEqual(['0', '1', '2']);
      const given = await runNatively(addonSpawn(), request('sh', ['-c', 'ls /proc/$$/fd; readlink /proc/$$/fd/0'], { fd3: fd }));
      expect(given.stdout.split('\n')).toEqual(['0', '1', '2', '3', '/dev/null']);
    } finally {
      closeSync(fd);
    }
  });

  it("looks the tool up on the request's PATH, not the server's, and names why one cannot start", async () => {
    const tool = join(dir, 'twinvol-native-tool');
    writeFileSync(tool, '#!/bin/sh\necho found "$@"\n');
    chmodSync(tool, 0o755);
    const found = await runNatively(addonSpawn(), request('twinvol-native-tool', ['x'], { env: { PATH: `/nonexistent:${dir}:/bin` } }));
    expect(found).toMatchObject({ exitCode: 0, stdout: 'found x' });
    expect(await runNatively(addonSpawn(), request('twinvol-native-tool', []))).toMatchObject({ exitCode: -1, startError: 'spawn ENOENT' });
    chmodSync(tool, 0o644);
    expect(await runNatively(addonSpawn(), request(tool, []))).toMatchObject({ exitCode: -1, startError: 'spawn EACCES' });
    expect(await runNatively(addonSpawn(), request('twinvol-native-tool', [], { env: { PATH: dir } }))).toMatchObject({ startError: 'spawn EACCES' });
  });

  it('keeps the latest bytes of a stream many times its cap, and counts every byte before them', async () => {
    const r = await runNatively(addonSpawn(), request('sh', ['-c', 'seq 1 20000; echo end >&2'], { outputCap: 100 }));
    const all = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
    expect(r.stdout).toBe(`... (${all.length - 100} bytes left out)\n${all.slice(-100, -1)}`);
    expect(r.stderr).toBe('end');
  });

  it('answers many tools at once, each its own, and keeps none of their descriptors afterwards', async () => {
    const open = () => readdirSync('/proc/self/fd').length;
    // The tests before close their tools' pipes a turn of the loop after their answers.
    await new Promise((r) => setTimeout(r, 20));
    const before = open();
    const answers = await Promise.all(Array.from({ length: 64 }, (_, i) => runNatively(addonSpawn(), request('sh', ['-c', `echo out${i}; echo err${i} >&2; exit ${i % 5}`]))));
    expect(answers.map((a) => [a.exitCode, a.stdout, a.stderr])).toEqual(Array.from({ length: 64 }, (_, i) => [i % 5, `out${i}`, `err${i}`]));
    // The pipes and pidfds are closed by libuv's close callbacks, a turn of the loop after the answer:
    // waited for with a deadline long enough for a loaded machine (a second was not, beside other suites).
    for (const until = Date.now() + 10_000; Date.now() < until && open() > before; ) await new Promise((r) => setTimeout(r, 10));
    // At most as many as before: the 128 pipes and 64 pidfds are all closed (vitest's own may come and go).
    expect(open()).toBeLessThanOrEqual(before);
  });

  it('kills a tool that writes without end at its deadline, keeping the latest of what it wrote', async () => {
    const r = await runNatively(addonSpawn(), request('yes', ['twinvol'], { timeoutMs: 300, outputCap: 1000 }));
    expect(r).toMatchObject({ exitCode: -1, timedOut: true });
    const [said, ...kept] = r.stdout.split('\n');
    expect(said).toMatch(/^\.\.\. \(\d+ bytes left out\)$/);
    // The last 1000 bytes, less the final newline; the first line may be cut.
    expect(kept.join('\n').length).toBe(999);
    expect(kept.slice(1).every((line) => line === 'twinvol')).toBe(true);
  });

  it('refuses arguments it cannot pass on as they are, starting nothing', () => {
    const env = ['PATH=/bin'];
    expect(started('sh', ['sh', 'a\0b'], env, [], 10).began).toEqual({ errno: 22 });
    expect(started('sh', [], env, [], 10).began).toEqual({ errno: 22 });
    expect(started('sh', ['sh'], env, [1], 10).began).toEqual({ errno: 9 });
    // The second would be read from fd 3 after the first was put there; a number past int32 is no descriptor.
    expect(started('sh', ['sh'], env, [4, 3], 10).began).toEqual({ errno: 9 });
    expect(started('sh', ['sh'], env, [2 ** 32 + 3], 10).began).toEqual({ errno: 9 });
    expect(started('sh', ['sh'], ['PATH=/bin', 'A=\0'], [], 10).began).toEqual({ errno: 22 });
    expect(started('sh', ['sh'], env, [], 0).began).toEqual({ errno: 22 });
    // A file name past PATH_MAX; an argument that long is the kernel's to judge (test/exec/run-driver.test.ts).
    expect(started(`/${'x'.repeat(5000)}`, ['sh'], env, [], 10).began).toEqual({ errno: 36 });
  });

  it('passes an argument of 100 KiB whole, where the copy of each once stopped at 4 KiB', async () => {
    const big = 'a'.repeat(100 * 1024);
    const { began, exit } = started('sh', ['sh', '-c', 'printf %s "${#1}"', 'sh', big], ['PATH=/bin', `BIG=${big}`], [], 1024);
    expect(began).toHaveProperty('pid');
    expect((await exit).stdout.toString()).toBe(String(big.length));
  });

  it("refuses a driver's arguments it cannot pass on, and an output that is not a descriptor from 3, starting nothing", () => {
    const startDriver = addonSpawn().startDriver;
    if (!startDriver) throw new Error('build/Release/twinvol_mount.node lacks spawnDriver: npm ci builds it');
    const out = openSync(join(dir, 'out'), 'w');
    const none = () => undefined;
    try {
      expect(startDriver('sh', ['sh'], ['PATH=/bin'], 1, none)).toEqual({ errno: 9 });
      // Not taken for `out` wrapped into 32 bits.
      expect(startDriver('sh', ['sh'], ['PATH=/bin'], 2 ** 32 + out, none)).toEqual({ errno: 9 });
      expect(startDriver('sh', [], ['PATH=/bin'], out, none)).toEqual({ errno: 22 });
      expect(startDriver('s\0h', ['sh'], ['PATH=/bin'], out, none)).toEqual({ errno: 22 });
      expect(startDriver('sh', ['sh'], ['PATH=/bin', 'A=\0'], out, none)).toEqual({ errno: 22 });
    } finally {
      closeSync(out);
    }
  });

  it('answers no exit code for a tool a signal ended', async () => {
    const { began, exit } = started('sleep', ['sleep', '30.0931'], ['PATH=/bin'], [], 10);
    expect(began).toHaveProperty('pid');
    if ('pid' in began) process.kill(began.pid, 'SIGTERM');
    expect(await exit).toMatchObject({ code: null, stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) });
  });
});

describe("the addon's spawn, as shared/native-mount.ts parseAddon reads it", () => {
  const parsed = (spawnTool: unknown, spawnSupported: unknown = () => 0) => parseAddon(addonExports({ spawnTool, spawnSupported }))?.spawnTool;

  it('is there only with both of its calls, and only supported where the addon says 0', () => {
    expect(parseAddon(addonExports())?.spawnTool).toBeUndefined();
    expect(parsed(() => 7, null)).toBeUndefined();
    expect(parsed(undefined)).toBeUndefined();
    expect(parsed(() => 7)?.supported()).toBe(true);
    expect(parsed(() => 7, () => 38)?.supported()).toBe(false);
  });

  it('takes a positive integer for a pid and a negative one for an errno; anything else is a failed start', () => {
    const start = (answer: unknown) => parsed(() => answer)?.start('x', ['x'], [], [], 1, () => undefined);
    expect([7, -2, 0, 1.5, '7', null].map(start)).toEqual([{ pid: 7 }, { errno: 2 }, { errno: -1 }, { errno: -1 }, { errno: -1 }, { errno: -1 }]);
  });

  it('reads the exit it is called back with, a field it cannot read as nothing', () => {
    const exits: ToolExit[] = [];
    // An addon that calls back at once with `args`, and answers a pid.
    const callingBack = (...args: unknown[]) => (...given: unknown[]) => {
      const onExit = given[5];
      if (typeof onExit === 'function') onExit(...args);
      return 7;
    };
    const callBack = (...args: unknown[]) => parsed(callingBack(...args))?.start('x', ['x'], [], [], 1, (e) => exits.push(e));
    callBack(3, Buffer.from('out'), 2, Buffer.from('err'), 0, null);
    callBack(null, 'out', -1, undefined, 2 ** 60);
    // The signal's number, named; one Node has no name for (a real-time signal), and none, are unknown.
    for (const signal of [9, 34, 'x']) callBack(null, Buffer.alloc(0), 0, Buffer.alloc(0), 0, signal);
    const none = { stdout: Buffer.alloc(0), stdoutDropped: 0, stderr: Buffer.alloc(0), stderrDropped: 0 };
    expect(exits).toEqual([
      { code: 3, stdout: Buffer.from('out'), stdoutDropped: 2, stderr: Buffer.from('err'), stderrDropped: 0 },
      { code: null, signal: 'unknown', ...none },
      { code: null, signal: 'SIGKILL', ...none },
      { code: null, signal: 'unknown', ...none },
      { code: null, signal: 'unknown', ...none },
    ]);
  });
});

describe("the addon's driver start, as parseAddon reads it", () => {
  it('is there only beside spawnTool, and reads a pid, an errno and the exit code as the tool start does', () => {
    const codes: (number | null)[] = [];
    // An addon whose spawnDriver calls back at once with `code`, and answers `answer`.
    const spawnDriver = (answer: unknown, code: unknown) => (...given: unknown[]) => {
      const onExit = given[4];
      if (typeof onExit === 'function') onExit(code, Buffer.alloc(0), 0, Buffer.alloc(0), 0);
      return answer;
    };
    const parsed = (driver: unknown, tool: unknown = () => 7) => parseAddon(addonExports({ spawnTool: tool, spawnSupported: () => 0, spawnDriver: driver }))?.spawnTool;
    expect(parsed(undefined)?.startDriver).toBeUndefined();
    expect(parsed(() => 7, null)).toBeUndefined();
    const start = (answer: unknown, code: unknown) => parsed(spawnDriver(answer, code))?.startDriver?.('x', ['x'], [], 3, (c) => codes.push(c));
    expect([start(9, 0), start(-13, 1), start('9', 2), start(9, 'x')]).toEqual([{ pid: 9 }, { errno: 13 }, { errno: -1 }, { pid: 9 }]);
    expect(codes).toEqual([0, 1, 2, null]);
  });
});

describe('spawnNatively', () => {
  afterEach(() => {
    setSpawner(spawnHere);
    setNativeMountPath(undefined);
    vi.restoreAllMocks();
  });

  it('runs the tools through the addon where it can, and leaves the rest to the way it is given', async () => {
    const start = vi.spyOn(addonSpawn(), 'start');
    const otherwise = vi.fn();
    spawnNatively(otherwise);
    expect(await run('echo', ['native'], { timeoutMs: 10_000 })).toMatchObject({ stdout: 'native' });
    expect(start).toHaveBeenCalledTimes(1);
    expect(otherwise).not.toHaveBeenCalled();
    // TWINVOL_NATIVE_MOUNT=off, or no addon: the other way, chosen once.
    setNativeMountPath(null);
    spawnNatively(otherwise);
    expect(otherwise).toHaveBeenCalledTimes(1);
  });
});

describe('a thread that ends while its tool runs', () => {
  /**
   * A worker that starts `sleep` through the addon (as a tool, or as a driver writing to a file), says
   * its pid, and then ends as `end` says.
   */
  const program = (start: string, end: string) => `
    const { parentPort } = require('node:worker_threads');
    const addon = require(${JSON.stringify(join(import.meta.dirname, '../../build/Release/twinvol_mount.node'))});
    const answered = () => parentPort.postMessage('answered');
    const pid = ${start};
    parentPort.postMessage(pid);
    ${end}
  `;
  const tool = "addon.spawnTool('sleep', ['sleep', '30.0457'], ['PATH=/bin'], [], 100, answered)";
  const driver = "addon.spawnDriver('sleep', ['sleep', '30.0457'], ['PATH=/bin'], require('node:fs').openSync('/dev/null', 'w'), answered)";

  it.each([
    ['a tool', 'terminated', tool, ''],
    ['a tool', 'exiting', tool, 'process.exit(0);'],
    ['a driver', 'terminated', driver, ''],
    ['a driver', 'exiting', driver, 'process.exit(0);'],
  ])('running %s, is %s without a crash, and leaves it to run on', async (_what, _how, start, end) => {
    const worker = new Worker(program(start, end), { eval: true });
    const messages: unknown[] = [];
    const pid = await new Promise<unknown>((resolve) => worker.once('message', resolve));
    worker.on('message', (m) => messages.push(m));
    try {
      expect(pid).toBeTypeOf('number');
      const code = await Promise.race([worker.terminate(), new Promise((resolve) => worker.once('exit', resolve))]);
      expect([0, 1, undefined]).toContain(code);
      // The process goes on (this test is still running), and the tool is there to be killed.
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toBe('sleep\u000030.0457\u0000');
      expect(messages).toEqual([]);
    } finally {
      if (typeof pid === 'number') process.kill(pid, 'SIGKILL');
    }
  });
});
