import { killIfStill } from '../helpers/kill-if-still.js';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CommandError, OUTPUT_CAP, observeSpawns, run, SPAWN_LOG_LIMIT, type SpawnRecord, setSpawner, spawnHere, spawnLog } from '../../shared/runner.js';
import { bindingSpawn, publicSpawn, runBlocking, spawnBlockingHere } from '../../shared/spawn-blocking.js';
import { spawnNatively } from '../../shared/spawn-native.js';
import { spawnOffThread } from '../../shared/spawn-thread.js';
import { expectRejects } from './expect-error.js';

const opts = { timeoutMs: 10_000 };

let dir: string;
beforeEach(() => {
  dir = mkdtempSync('/tmp/twinvol-test-runner-');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Processes whose command line is exactly `argv`. */
/**
 * A sleep this test process alone runs: its seconds end in this process's pid, so a run of the same
 * suite beside it (another checkout's) is not taken for a process this one left behind.
 */
const ownSleep = (seconds: string): string[] => ['sleep', `${seconds}${process.pid}`];

function processesRunning(argv: string[]): number[] {
  const wanted = `${argv.join('\0')}\0`;
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8') === wanted) pids.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

/**
 * Every rule of the runner holds wherever the tools are spawned: on this thread (a FlexVolume call),
 * on the spawning thread (shared/spawn-thread.ts), which runs the same code, and by the addon's
 * posix_spawn (shared/spawn-native.ts), the CSI server's way.
 */
describe.each([
  ['on this thread', () => setSpawner(spawnHere)],
  ['on the spawning thread', spawnOffThread],
  ['blocking this thread (a FlexVolume call)', spawnBlockingHere],
  [
    'natively (posix_spawn, the exit watched through a pidfd)',
    () =>
      spawnNatively(() => {
        throw new Error('the addon cannot spawn here: build/Release/twinvol_mount.node is missing or old');
      }),
  ],
])('run, %s', (_where, useSpawner) => {
  beforeAll(useSpawner);
  afterAll(() => setSpawner(spawnHere));

  it('passes arguments literally, with no shell in between', async () => {
    const victim = join(dir, 'x');
    const nasty = `hello; rm -rf ${victim} $(touch ${victim}) \`touch ${victim}\` | cat > ${victim} && echo pwned`;
    const r = await run('echo', [nasty], opts);
    expect(r.stdout).toBe(nasty);
    expect(r.exitCode).toBe(0);
    const p = await run('printf', ['%s|', '$HOME', '*', "it's", '"q"', ''], opts);
    expect(p.stdout).toBe(`$HOME|*|it's|"q"||`);
    expect(existsSync(victim)).toBe(false);
  });

  it('closes stdin and gives the tool a fixed environment with the sbin directories on PATH', async () => {
    const r = await run('cat', [], opts);
    expect(r.stdout).toBe('');
    const env = await run('env', [], opts);
    const lines = env.stdout.split('\n').sort();
    expect(lines.filter((l) => !l.startsWith('PATH='))).toEqual(['LC_ALL=C']);
    const path = lines.find((l) => l.startsWith('PATH='))!.slice(5).split(':');
    expect(path).toEqual(expect.arrayContaining(['/usr/sbin', '/sbin', '/usr/bin', '/bin']));
  });

  it('throws a CommandError carrying stderr, the command line and the exit code', async () => {
    const err = (await expectRejects(
      run('sh', ['-c', 'echo first line >&2; echo "mount: /x: permission denied." >&2; exit 32'], opts),
      'Internal',
    )) as CommandError;
    expect(err).toBeInstanceOf(CommandError);
    expect(err.message).toBe(
      'sh -c echo first line >&2; echo "mount: /x: permission denied." >&2; exit 32 failed with exit code 32: first line; mount: /x: permission denied.',
    );
    expect(err.result).toMatchObject({ command: 'sh', exitCode: 32, stdout: '', stderr: 'first line\nmount: /x: permission denied.' });
  });

  // mkfs.xfs explains ("Filesystem must be larger than 300MB.") and then prints 18 lines of usage:
  // the three lines once kept hid the reason (issue 11).
  it('keeps the last 20 lines of a long stderr, at most 4 KiB of them, and falls back to stdout', async () => {
    const e = await expectRejects(run('sh', ['-c', 'seq 1 25 >&2; exit 1'], opts), 'Internal', /exit code 1: 6; 7; 8; .*; 24; 25$/);
    expect(e.message).not.toMatch(/: 5; /);
    const long = await expectRejects(run('sh', ['-c', 'for i in $(seq 1 20); do printf "%0500d\\n" $i; done >&2; exit 1'], opts), 'Internal');
    expect(long.message).toMatch(/exit code 1: \.\.\.[0-9; ]+; 0{497}020$/);
    expect(Buffer.byteLength(long.message.split('exit code 1: ')[1] ?? '')).toBeLessThanOrEqual(4096 + 3);
    await expectRejects(run('sh', ['-c', 'echo only-stdout; exit 4'], opts), 'Internal', /exit code 4: only-stdout$/);
    await expectRejects(run('false', [], opts), 'Internal', /^false\s+failed with exit code 1$/);
  });

  it('keeps the last OUTPUT_CAP bytes of a stream that writes on and on, after a line saying how much went before', async () => {
    const r = await run('sh', ['-c', `head -c ${OUTPUT_CAP + 2 ** 20} /dev/zero | tr '\\0' x; echo END`], opts);
    expect(r.stdout.length).toBe(OUTPUT_CAP + '... (1048580 bytes left out)\n'.length - 1);
    expect(r.stdout.startsWith(`... (1048580 bytes left out)\nxxx`)).toBe(true);
    expect(r.stdout.endsWith('xxxEND')).toBe(true);
    // What a failing tool says last survives a flood before it.
    const e = await expectRejects(run('sh', ['-c', `head -c ${2 * OUTPUT_CAP} /dev/zero | tr '\\0' y >&2; echo >&2; echo the reason >&2; exit 1`], opts), 'Internal');
    expect(e.message.endsWith('yyy; the reason')).toBe(true);
  });

  it('treats okExitCodes as answers, not failures', async () => {
    const r = await run('sh', ['-c', 'echo nothing found; exit 2'], { ...opts, okExitCodes: [2] });
    expect(r).toMatchObject({ exitCode: 2, stdout: 'nothing found', stderr: '' });
    await expectRejects(run('sh', ['-c', 'exit 3'], { ...opts, okExitCodes: [2] }), 'Internal', 'exit code 3');
  });

  it('kills a command that overruns its deadline and throws Internal', async () => {
    // A distinctive argument, so the process can be looked for afterwards.
    const argv = ownSleep('30.0417');
    await expectRejects(run(argv[0]!, argv.slice(1), { timeoutMs: 1000 }), 'Internal', 'sleep did not finish within 1000 ms');
    expect(processesRunning(argv)).toEqual([]);
    const rec = spawnLog().at(-1)!;
    expect(rec.args).toEqual(argv.slice(1));
    expect(rec.exitCode).toBe(-1);
  });

  // A mount helper may leave a daemon behind (FUSE, a forked sleep) holding the tool's output: the
  // call is answered when the tool exits, not when the daemon lets go (shared/runner.ts, spawnCaptured).
  it('answers when the tool exits, while a daemon it left behind still holds its output', async () => {
    // The shell names its daemon before it exits, so the daemon is killed whatever fails below.
    const pidFile = join(dir, 'daemon.pid');
    try {
      const r = await run('sh', ['-c', `echo started; echo note >&2; sleep 30.0623 & echo $! > ${pidFile}; exit 0`], { timeoutMs: 5000 });
      expect(r).toMatchObject({ exitCode: 0, stdout: 'started', stderr: 'note' });
      expect(existsSync(`/proc/${readFileSync(pidFile, 'utf8').trim()}`)).toBe(true);
    } finally {
      if (existsSync(pidFile)) killIfStill(Number(readFileSync(pidFile, 'utf8')), (argv) => argv[1] === '30.0623');
    }
  });

  it('gives the tool fd 3 when asked', async () => {
    const file = join(dir, 'pinned');
    writeFileSync(file, 'x');
    const fd = openSync(file, 'r');
    try {
      const r = await run('readlink', ['/proc/self/fd/3'], { timeoutMs: 10_000, fd3: fd });
      expect(r.stdout).toBe(file);
    } finally {
      closeSync(fd);
    }
  });

  it('throws Internal when the command cannot be started', async () => {
    await expectRejects(run('/nonexistent/twinvol-tool', ['x'], opts), 'Internal', '/nonexistent/twinvol-tool could not be started');
  });

  it('marks a spawn failed unless it answered: exit 0 or one of its okExitCodes (the CSI metrics count these)', async () => {
    const seen: SpawnRecord[] = [];
    const stop = observeSpawns((r) => seen.push(r));
    try {
      await run('sh', ['-c', 'exit 0'], opts);
      await run('sh', ['-c', 'exit 2'], { ...opts, okExitCodes: [2] });
      await run('sh', ['-c', 'exit 3'], { ...opts, okExitCodes: [2] }).catch(() => undefined);
      await run('sleep', ['30'], { timeoutMs: 200 }).catch(() => undefined);
      await run(join(dir, 'no-such-tool'), [], opts).catch(() => undefined);
    } finally {
      stop();
    }
    expect(seen.map((r) => [r.args.at(-1) ?? r.command, r.failed])).toEqual([
      ['exit 0', false],
      ['exit 2', false],
      ['exit 3', true],
      ['30', true],
      [join(dir, 'no-such-tool'), true],
    ]);
  });

  it('records each spawn in order and tells observers, until they unsubscribe', async () => {
    const seen: SpawnRecord[] = [];
    const stop = observeSpawns((r) => seen.push(r));
    await run('true', ['a'], opts);
    await run('sh', ['-c', 'exit 5'], opts).catch(() => undefined);
    stop();
    await run('true', ['after'], opts);

    const logged = spawnLog().slice(-3);
    expect(logged.map((r) => [r.command, r.args, r.exitCode])).toEqual([
      ['true', ['a'], 0],
      ['sh', ['-c', 'exit 5'], 5],
      ['true', ['after'], 0],
    ]);
    expect(seen).toEqual(logged.slice(0, 2));
    for (const r of logged) expect(r.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('keeps only the latest SPAWN_LOG_LIMIT spawns, so a long-running server does not grow', async () => {
    for (let i = 0; i < SPAWN_LOG_LIMIT + 10; i++) await run('true', [`n${i}`], opts);
    expect(spawnLog()).toHaveLength(SPAWN_LOG_LIMIT);
    expect(spawnLog().at(-1)?.args).toEqual([`n${SPAWN_LOG_LIMIT + 9}`]);
    expect(spawnLog().at(0)?.args).toEqual(['n10']);
  });
});

describe('the spawning thread', () => {
  afterEach(() => setSpawner(spawnHere));

  /** The processes a thread of this process started and are still running (/proc/<pid>/task/<tid>/children). */
  const childrenOfMainThread = () => readFileSync(`/proc/self/task/${process.pid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);

  it('starts the tools, so they are not children of the main thread', async () => {
    const argv = ownSleep('30.0518');
    // Each run ends at its deadline, whatever fails here; a failed check still waits for them.
    const runs: Promise<unknown>[] = [];
    try {
      spawnOffThread();
      const running = run(argv[0]!, argv.slice(1), { timeoutMs: 1500 });
      runs.push(running);
      let pids: number[] = [];
      for (let i = 0; i < 200 && !pids.length; i++) {
        await new Promise((r) => setTimeout(r, 5));
        pids = processesRunning(argv);
      }
      expect(pids).toHaveLength(1);
      expect(childrenOfMainThread()).not.toContain(pids[0]);
      await expectRejects(running, 'Internal', 'did not finish within 1500 ms');
      // The same tool spawned here is the main thread's child: the check above can tell the two apart.
      setSpawner(spawnHere);
      const here = run(argv[0]!, argv.slice(1), { timeoutMs: 1500 });
      runs.push(here);
      for (let i = 0; i < 200 && !childrenOfMainThread().length; i++) await new Promise((r) => setTimeout(r, 5));
      expect(childrenOfMainThread()).toEqual(processesRunning(argv));
      await expectRejects(here, 'Internal', 'did not finish within 1500 ms');
    } finally {
      await Promise.allSettled(runs);
    }
  });

  it('runs many tools at once and gives each its own answer', async () => {
    spawnOffThread();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => run('echo', [`n${i}`], { timeoutMs: 10_000 })));
    expect(answers.map((a) => a.stdout)).toEqual(Array.from({ length: 20 }, (_, i) => `n${i}`));
  });
});

/**
 * The blocking spawner's two ways to spawn: process.binding's, which it uses (the suite above runs
 * it), and the public spawnSync it falls back on where a Node has no such binding.
 */
const binding = bindingSpawn();

// Without it the binding's suite below would run the default way (the public spawnSync) unnoticed.
it("this Node offers the spawn_sync binding, the blocking spawner's first choice", () => {
  expect(binding).toBeTypeOf('function');
});

describe.each([
  ['the binding', binding],
  ['the public spawnSync', publicSpawn],
])('blocking this thread, through %s', (_way, spawnSync) => {
  const env = { PATH: '/usr/bin:/bin' };
  /** The processes this process started and are still running. */
  const children = () => readFileSync(`/proc/self/task/${process.pid}/children`, 'utf8').trim().split(' ').filter(Boolean);

  it('runs the tool to its exit before it returns, with nothing left running', () => {
    const captured = runBlocking({ command: 'sh', args: ['-c', 'printf "a\\nb\\n"; echo oops >&2; exit 7'], timeoutMs: 10_000, env, outputCap: OUTPUT_CAP }, spawnSync);
    // Not a promise: the answer is there when the call returns.
    expect(captured).not.toBeInstanceOf(Promise);
    expect(captured).toMatchObject({ exitCode: 7, stdout: 'a\nb', stderr: 'oops', timedOut: false });
    expect(children()).toEqual([]);
  });

  it('kills the tool at its deadline, and says a tool that cannot be started could not', () => {
    const argv = ownSleep('30.0711');
    expect(runBlocking({ command: argv[0]!, args: argv.slice(1), timeoutMs: 300, env, outputCap: OUTPUT_CAP }, spawnSync)).toMatchObject({ exitCode: -1, timedOut: true });
    expect(processesRunning(argv)).toEqual([]);
    expect(runBlocking({ command: join(dir, 'no-such-tool'), args: [], timeoutMs: 10_000, env, outputCap: OUTPUT_CAP }, spawnSync)).toMatchObject({ exitCode: -1, timedOut: false, startError: 'spawn ENOENT' });
  });

  it('leaves a tool that walks a volume\'s data to the runner\'s own way, which keeps the event loop turning', async () => {
    const lengthy = runBlocking({ command: 'sh', args: ['-c', 'echo walked'], timeoutMs: 10_000, env, lengthy: true, outputCap: OUTPUT_CAP }, spawnSync);
    expect(lengthy).toBeInstanceOf(Promise);
    expect(await lengthy).toMatchObject({ exitCode: 0, stdout: 'walked' });
  });
});
