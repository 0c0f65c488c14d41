import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { STALE_MS, withLock } from '../../shared/store/lock.js';
import { expectRejects } from './expect-error.js';

const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)));

/**
 * A child process holding the lock through the real shared/store/lock.ts, bundled by esbuild for the
 * test (no TypeScript loader needed, and no copy of the lock's options to drift from them).
 * argv: lockPath holdMs logFile. It prints "locked" once it holds the lock; holdMs < 0 holds forever.
 */
const CHILD_ENTRY = `
import { appendFileSync } from 'node:fs';
import { withLock } from ${JSON.stringify(join(repoRoot, 'shared/store/lock.ts'))};
const [lockPath, holdMs, logFile] = process.argv.slice(2);
void withLock(lockPath, async () => {
  appendFileSync(logFile, 'child-start\\n');
  process.stdout.write('locked\\n');
  if (Number(holdMs) < 0) await new Promise(() => setInterval(() => {}, 1000));
  await new Promise((r) => setTimeout(r, Number(holdMs)));
  appendFileSync(logFile, 'child-end\\n');
});
`;

/**
 * A child that, from the moment `goAt` (ms since the epoch), takes each of `rounds` locks in turn,
 * `gapMs` apart, so that several children arrive at each together. Inside, it makes a file only one
 * may hold (O_EXCL) for 5 ms: a second one inside logs "overlap".
 * argv: dir goAt rounds gapMs
 */
const TAKER_ENTRY = `
import { appendFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { withLock } from ${JSON.stringify(join(repoRoot, 'shared/store/lock.ts'))};
const [dir, goAt, rounds, gapMs] = process.argv.slice(2).map((a, i) => (i === 0 ? a : Number(a)));
void (async () => { for (let r = 0; r < rounds; r++) {
  while (Date.now() < goAt + r * gapMs);
  await withLock(\`\${dir}/round-\${r}.lock\`, async () => {
    try {
      writeFileSync(\`\${dir}/inside-\${r}\`, '', { flag: 'wx' });
    } catch {
      return appendFileSync(\`\${dir}/log\`, \`overlap \${r}\\n\`);
    }
    await new Promise((res) => setTimeout(res, 5));
    unlinkSync(\`\${dir}/inside-\${r}\`);
    appendFileSync(\`\${dir}/log\`, \`ok \${r}\\n\`);
  }, { waitMs: 20_000 }).catch((e) => appendFileSync(\`\${dir}/log\`, \`error \${r} \${e.message}\\n\`));
} })();
`;

/**
 * A lock left by a holder that died, as its crash leaves it: the directory, the owner file naming a
 * process that is gone (a pid of an exited child with a start time no process has), a minute old.
 */
function deadHoldersLock(lockPath: string): void {
  mkdirSync(lockPath);
  const dead = { pid: spawnSync('true').pid, start: '1', host: hostname(), ino: statSync(lockPath).ino };
  writeFileSync(`${lockPath}.owner`, JSON.stringify(dead));
  const old = new Date(Date.now() - 60_000);
  utimesSync(lockPath, old, old);
}

let dir: string;
let childScript: string;
let logFile: string;
const children: ChildProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync('/tmp/twinvol-test-lock-');
  childScript = join(dir, 'hold-lock.cjs');
  logFile = join(dir, 'log');
  buildSync({ stdin: { contents: CHILD_ENTRY, resolveDir: repoRoot, loader: 'ts' }, bundle: true, platform: 'node', format: 'cjs', outfile: childScript, logLevel: 'error' });
  writeFileSync(logFile, '');
});

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** Starts a child that takes the lock; resolves once it holds it. */
function childHolding(lockPath: string, holdMs: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [childScript, lockPath, String(holdMs), logFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise((resolvePromise, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('locked\n')) resolvePromise(child);
    });
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.on('exit', (code, signal) => reject(new Error(`lock child exited (${code ?? signal}) before locking: ${err}`)));
  });
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once('exit', () => r()));
}

const log = (line: string) => appendFileSync(logFile, `${line}\n`);
const logLines = () => readFileSync(logFile, 'utf8').split('\n').filter(Boolean);

describe('withLock in one process', () => {
  it('serialises critical sections that await inside', async () => {
    const lockPath = join(dir, 'locks', 'counter.lock');
    let counter = 0;
    let inside = 0;
    let maxInside = 0;
    const trace: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        withLock(lockPath, async () => {
          inside++;
          maxInside = Math.max(maxInside, inside);
          trace.push(`enter-${i}`);
          const read = counter;
          await sleep(15);
          await new Promise((r) => setImmediate(r));
          counter = read + 1;
          trace.push(`leave-${i}`);
          inside--;
          return i;
        }),
      ),
    );
    expect(counter).toBe(8);
    expect(maxInside).toBe(1);
    // Every enter is directly followed by its own leave.
    for (let k = 0; k < trace.length; k += 2) expect(trace[k + 1]).toBe(trace[k]!.replace('enter', 'leave'));
  });

  it('returns the value of fn and releases the lock (the directory is gone)', async () => {
    const lockPath = join(dir, 'a.lock');
    expect(await withLock(lockPath, async () => 42)).toBe(42);
    expect(existsSync(lockPath)).toBe(false);
  });

  it('releases the lock when fn throws, and passes the error on', async () => {
    const lockPath = join(dir, 'a.lock');
    await expect(withLock(lockPath, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(existsSync(lockPath)).toBe(false);
    // Taken again at once: a lock that leaked would make this Aborted.
    expect(await withLock(lockPath, async () => 'again', { waitMs: 150 })).toBe('again');
  });

  it('answers Aborted, naming the lock, when it stays busy longer than waitMs', async () => {
    const lockPath = join(dir, 'busy.lock');
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let entered!: () => void;
    const inside = new Promise<void>((r) => {
      entered = r;
    });
    const holder = withLock(lockPath, async () => {
      entered();
      await held;
    });
    await inside;
    let ran = false;
    const started = Date.now();
    await expectRejects(
      withLock(lockPath, async () => {
        ran = true;
      }, { waitMs: 300 }),
      'Aborted',
      `another operation holds ${lockPath}; try again`,
    );
    expect(ran).toBe(false);
    // A lower bound only: the deadline must not come early (it once did, after 44 ms of a 300 ms wait).
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    release();
    await holder;
  });
});

describe('withLock across processes', () => {
  it('waits for a lock held by another process and enters only after it is released', async () => {
    const lockPath = join(dir, 'x.lock');
    const child = await childHolding(lockPath, 1500);
    await withLock(lockPath, async () => {
      log('parent-start');
      await sleep(20);
      log('parent-end');
    });
    await exited(child);
    expect(child.exitCode).toBe(0);
    expect(logLines()).toEqual(['child-start', 'child-end', 'parent-start', 'parent-end']);
  });

  it('answers Aborted while a live process holds the lock, however old the lock', async () => {
    const lockPath = join(dir, 'x.lock');
    await childHolding(lockPath, -1);
    // Past the second after which a dead holder's lock would be taken over (shared/store/lock.ts).
    await expectRejects(withLock(lockPath, async () => 'never', { waitMs: 2500 }), 'Aborted', 'another operation holds');
  });

  it('takes over at once a lock whose holder was SIGKILLed: well inside the 10 s stale period', async () => {
    const lockPath = join(dir, 'crashed.lock');
    const child = await childHolding(lockPath, -1);
    child.kill('SIGKILL');
    await exited(child);
    expect(existsSync(lockPath)).toBe(true);
    // A wait shorter than the stale period: only knowing the holder dead can get the lock in time.
    expect(await withLock(lockPath, async () => 'acquired', { waitMs: 5000 })).toBe('acquired');
    expect(existsSync(lockPath)).toBe(false);
    expect(existsSync(`${lockPath}.owner`)).toBe(false);
  });

  it('never takes over a live holder on this host, however long it goes without refreshing (a starved process)', { timeout: 60_000 }, async () => {
    const lockPath = join(dir, 'starved.lock');
    const child = await childHolding(lockPath, 500);
    // Alive, but refreshing nothing: what 128 workers on two cores did to a holder in the long load run.
    child.kill('SIGSTOP');
    try {
      await expectRejects(withLock(lockPath, async () => 'never', { waitMs: STALE_MS + 2500 }), 'Aborted', 'another operation holds');
    } finally {
      child.kill('SIGCONT');
    }
    await exited(child);
    // It finished its critical section with its lock intact (a lost lock would have made it fail).
    expect(child.exitCode).toBe(0);
    expect(logLines()).toEqual(['child-start', 'child-end']);
  });

  it('takes over the lock of a holder on another host once it has not refreshed for STALE_MS', async () => {
    const lockPath = join(dir, 'remote.lock');
    const child = await childHolding(lockPath, -1);
    child.kill('SIGKILL');
    await exited(child);
    const owner = JSON.parse(readFileSync(`${lockPath}.owner`, 'utf8')) as Record<string, unknown>;
    writeFileSync(`${lockPath}.owner`, JSON.stringify({ ...owner, host: 'another-node' }));
    const old = new Date(Date.now() - STALE_MS - 1000);
    utimesSync(lockPath, old, old);
    expect(await withLock(lockPath, async () => 'acquired', { waitMs: 2000 })).toBe('acquired');
  });

  it('judges a reused pid by its start time, and leaves a holder on another host to the stale period', async () => {
    const lockPath = join(dir, 'reused.lock');
    const child = await childHolding(lockPath, -1);
    child.kill('SIGKILL');
    await exited(child);
    const owner = JSON.parse(readFileSync(`${lockPath}.owner`, 'utf8')) as Record<string, unknown>;
    // Another host's holder: its liveness cannot be known here.
    writeFileSync(`${lockPath}.owner`, JSON.stringify({ ...owner, host: 'another-node' }));
    await expectRejects(withLock(lockPath, async () => 'never', { waitMs: 2500 }), 'Aborted', 'another operation holds');
    // This very process, alive, but not the one that took the lock: a pid reused.
    writeFileSync(`${lockPath}.owner`, JSON.stringify({ ...owner, pid: process.pid, start: '1' }));
    expect(await withLock(lockPath, async () => 'acquired', { waitMs: 5000 })).toBe('acquired');
  });
});

describe('withLock taking over a dead holder\'s lock', () => {
  it('takes it over on a try with no wait, as the sweep of abandoned work tries (it found it busy for good)', async () => {
    const lockPath = join(dir, 'no-wait.lock');
    deadHoldersLock(lockPath);
    expect(await withLock(lockPath, async () => 'acquired', { waitMs: 0 })).toBe('acquired');
    expect(existsSync(lockPath)).toBe(false);
  });

  it('lets one waiter in at a time when several take over together', { timeout: 60_000 }, async () => {
    const takers = 4;
    const rounds = 30;
    for (let r = 0; r < rounds; r++) deadHoldersLock(join(dir, `round-${r}.lock`));
    const script = join(dir, 'taker.cjs');
    buildSync({ stdin: { contents: TAKER_ENTRY, resolveDir: repoRoot, loader: 'ts' }, bundle: true, platform: 'node', format: 'cjs', outfile: script, logLevel: 'error' });
    writeFileSync(join(dir, 'log'), '');
    // Every child loaded and spinning before the first round: they arrive together.
    const goAt = Date.now() + 1500;
    const all = Array.from({ length: takers }, () => spawn(process.execPath, [script, dir, String(goAt), String(rounds), '40'], { stdio: 'ignore' }));
    children.push(...all);
    await Promise.all(all.map(exited));
    const lines = readFileSync(join(dir, 'log'), 'utf8').split('\n').filter(Boolean);
    // Before the guard (shared/store/lock.ts takeOverIfAbandoned), two runs logged 13 and 9 overlaps.
    expect(lines.filter((l) => !l.startsWith('ok '))).toEqual([]);
    expect(lines).toHaveLength(takers * rounds);
    // No lock, owner file or guard left behind.
    expect(readdirSync(dir).filter((n) => n.startsWith('round-'))).toEqual([]);
  });

  it('clears the guard of a waiter that died taking over, and leaves a live waiter\'s alone', async () => {
    const lockPath = join(dir, 'guarded.lock');
    // The guard's name and text as shared/store/lock.ts makes them.
    const guard = `${lockPath}.takeover`;
    const ownStart = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ')[19]!;
    deadHoldersLock(lockPath);
    symlinkSync(JSON.stringify({ pid: process.pid, start: ownStart, host: hostname(), take: 1 }), guard);
    await expectRejects(withLock(lockPath, async () => 'never', { waitMs: 1500 }), 'Aborted', 'another operation holds');
    expect(existsSync(lockPath)).toBe(true);
    rmSync(guard);
    symlinkSync(JSON.stringify({ pid: spawnSync('true').pid, start: '1', host: hostname(), take: 1 }), guard);
    expect(await withLock(lockPath, async () => 'acquired', { waitMs: 5000 })).toBe('acquired');
    expect(readdirSync(dir).filter((n) => n.startsWith('guarded'))).toEqual([]);
  });

  it('leaves a live holder that could not read its own start time to the stale period', async () => {
    const lockPath = join(dir, 'no-start.lock');
    mkdirSync(lockPath);
    // This process, alive, with the empty start time an owner file says when /proc could not be read.
    writeFileSync(`${lockPath}.owner`, JSON.stringify({ pid: process.pid, start: '', host: hostname(), ino: statSync(lockPath).ino }));
    // Past the second after which a dead holder on this host is taken over, well inside STALE_MS.
    const aged = new Date(Date.now() - 2000);
    utimesSync(lockPath, aged, aged);
    await expectRejects(withLock(lockPath, async () => 'never', { waitMs: 1500 }), 'Aborted', 'another operation holds');
    expect(existsSync(lockPath)).toBe(true);
  });

  it('names a file in the guard\'s place that it did not make, rather than waiting for it to go', async () => {
    const lockPath = join(dir, 'foreign.lock');
    deadHoldersLock(lockPath);
    writeFileSync(`${lockPath}.takeover`, 'not a link');
    await expectRejects(withLock(lockPath, async () => 'never', { waitMs: 5000 }), 'FailedPrecondition', `${lockPath}.takeover is not a takeover guard`);
    // Left as it was: the lock, and the file.
    expect(existsSync(lockPath)).toBe(true);
    expect(readFileSync(`${lockPath}.takeover`, 'utf8')).toBe('not a link');
  });
});
