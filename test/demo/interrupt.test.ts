import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { loopsLeftUnder, mountsUnder, releaseUnder } from '../helpers/scratch.js';

/**
 * `npm run demo` (dist/demo.cjs) stopped half way, the signal sent to the demo's pid alone (as `kill`
 * or a supervisor sends it; a terminal's Ctrl-C reaches its whole process group): it must still stop
 * what it started and leave nothing of its scratch world. Each case waits for a point of the run it can
 * see (a mount, a line), never a fixed time.
 */
const DEMO = resolve(import.meta.dirname, '../../dist/demo.cjs');

interface DemoRun {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

let root = '';
let demo: DemoRun | undefined;

function startDemo(): DemoRun {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  const child = spawn(process.execPath, [DEMO], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, signal) => done({ code, signal })));
  return { child, out: () => out, err: () => err, exited };
}

/** Processes of the demo's world: the ones whose command line or environment names its scratch dir (its CSI server, a twinvol it runs). */
function processesOf(dir: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (['cmdline', 'environ'].some((f) => readFileSync(`/proc/${name}/${f}`, 'latin1').includes(dir))) pids.push(Number(name));
    } catch {
      // exited while being read
    }
  }
  return pids;
}

async function until(what: string, cond: () => boolean, deadlineMs = 60_000): Promise<void> {
  if (!(await eventually(cond, deadlineMs))) throw new Error(`no ${what} within ${deadlineMs} ms; demo said: ${demo?.out().slice(-2000)} ${demo?.err()}`);
}

/** Starts the demo and waits for its first line, which names the scratch dir. */
async function started(): Promise<DemoRun> {
  demo = startDemo();
  const d = demo;
  await until('scratch dir named', () => /scratch world, (\/tmp\/twinvol-demo-\w+)/.test(d.out()));
  root = /scratch world, (\/tmp\/twinvol-demo-\w+)/.exec(d.out())?.[1] ?? '';
  return d;
}

async function expectCleanExit(d: DemoRun, signal: NodeJS.Signals, code: number): Promise<void> {
  const end = await Promise.race([d.exited, new Promise<'late'>((r) => setTimeout(() => r('late'), 60_000))]);
  expect(end, d.err()).toEqual({ code, signal: null });
  expect(d.err()).toMatch(new RegExp(`^\\s*demo interrupted by ${signal}: .* removed ${root}\\n$`));
  expect(d.err().trim().split('\n')).toHaveLength(1);
  expect(await eventually(() => mountsUnder(root).length === 0), `mounts left: ${mountsUnder(root).join(', ')}`).toBe(true);
  expect(await loopsLeftUnder(root)).toEqual([]);
  expect(await eventually(() => processesOf(root).length === 0), `processes left: ${processesOf(root).join(', ')}`).toBe(true);
  expect(existsSync(root)).toBe(false);
}

afterEach(() => {
  if (demo && demo.child.exitCode === null && demo.child.signalCode === null) demo.child.kill('SIGKILL');
  if (root) {
    for (const pid of processesOf(root)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    releaseUnder(root);
  }
  root = '';
  demo = undefined;
});

describe('the demo interrupted', () => {
  it('SIGINT with a FlexVolume mount of its world up: exit 130, one line, nothing left', async () => {
    const d = await started();
    await until('mount under the scratch dir', () => mountsUnder(root).length > 0);
    d.child.kill('SIGINT');
    await expectCleanExit(d, 'SIGINT', 130);
  });

  it('SIGTERM with its CSI server running: the server stopped, exit 143, nothing left', async () => {
    const d = await started();
    await until('CSI server started', () => d.out().includes('start twinvol-csi, Probe'));
    expect(processesOf(root).length).toBeGreaterThan(0);
    d.child.kill('SIGTERM');
    await expectCleanExit(d, 'SIGTERM', 143);
  });

  it('SIGINT while `twinvol compare` runs: compare stops and cleans up first, then the demo; nothing left', async () => {
    const d = await started();
    await until('compare step', () => d.out().includes('5. The two models side by side'));
    d.child.kill('SIGINT');
    await expectCleanExit(d, 'SIGINT', 130);
  });
});
