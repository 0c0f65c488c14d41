// The world the FlexVolume protocol suites (test/flex/protocol-*.test.ts) run in: a scratch per test,
// a kubelet-like runner that keeps stdout and stderr apart, and the reply checks kubelet's
// pkg/volume/flexvolume applies. `s` and `undo` are live bindings, set afresh before each test.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, expect } from 'vitest';
import { readMounts } from '../../../shared/mountinfo.js';
import { FLEX_BIN, flexSession, mountOptions, podNamed } from '../../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../../helpers/kubelet-paths.js';
import { createScratch, type Scratch } from '../../helpers/scratch.js';

export let s: Scratch;
/** What a test made outside its scratch (a mount helper in /usr/sbin, a daemon it left): undone even on failure. */
export let undo: (() => void)[] = [];
/** Registers the per-test scratch (and the undo list) for the calling test file. */
export function useKubeletWorld(): void {
  beforeEach(() => {
    s = createScratch('node-a');
    undo = [];
  });
  afterEach(() => {
    try {
      for (const step of undo.reverse()) {
        try {
          step();
        } catch {
          // keep undoing the rest
        }
      }
    } finally {
      s.cleanup();
    }
  });
}


export const MiB = 2 ** 20;
export const KUBELET_PATH = '/usr/bin:/bin';
export const { createVolume } = flexSession(() => s.env);
export const pod = podNamed;

// ---------------------------------------------------------------------------------------------------
// A kubelet-like runner that keeps stdout and stderr apart (kubelet joins them; the rule is that
// stderr stays empty) and times both the process exit and the close of the pipes, which is when
// kubelet's call really ends.

export interface Call {
  argv: string[];
  exitCode: number;
  stdout: string;
  stderr: string;
  /** When the executable exited. */
  exitMs: number;
  /** When the last holder of its stdout/stderr let go: the end of the call for kubelet. */
  closeMs: number;
}

export interface CallOptions {
  env?: Record<string, string>;
  bin?: string;
  cwd?: string;
  /** Give up (and kill the executable) after this long: a hang must fail the test, not stall it. */
  limitMs?: number;
}

export function call(argv: string[], opts: CallOptions = {}): Promise<Call> {
  return new Promise((done, fail) => {
    const started = performance.now();
    const child = spawn(opts.bin ?? FLEX_BIN, argv, {
      cwd: opts.cwd ?? '/',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: opts.env ?? { PATH: KUBELET_PATH, ...s.env },
    });
    let stdout = '';
    let stderr = '';
    let exitMs = -1;
    const limit = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`flex ${argv[0]} did not finish within ${opts.limitMs ?? 60_000} ms`));
    }, opts.limitMs ?? 60_000);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (err) => {
      clearTimeout(limit);
      fail(err);
    });
    child.on('exit', () => (exitMs = performance.now() - started));
    child.on('close', (code) => {
      clearTimeout(limit);
      done({ argv, exitCode: code ?? -1, stdout, stderr, exitMs, closeMs: performance.now() - started });
    });
  });
}

/** kubelet's DriverStatus: every field the reply may carry and the JSON type Go decodes it into. */
export const FIELD_TYPES: Record<string, string> = {
  status: 'string',
  message: 'string',
  device: 'string',
  volumeName: 'string',
  attached: 'boolean',
  volumeNewSize: 'number',
  capabilities: 'object',
};
export const DEFAULT_CAPABILITIES: Record<string, boolean> = { attach: true, selinuxRelabel: true, supportsMetrics: false, fsGroup: true, requiresFSResize: true };

export const labelOf = (c: Call) => `${c.argv[0]} ${JSON.stringify(c.argv.slice(1)).slice(0, 200)}`;

/**
 * The reply as kubelet would take it: stderr empty, stdout one JSON object, only known fields with
 * the types Go decodes (no null anywhere), capabilities only where they differ from the defaults, and
 * the exit code that goes with the status. Returns the reply.
 */
export function replyOf(c: Call): Record<string, unknown> {
  const label = labelOf(c);
  expect(c.stderr, `${label}: stderr`).toBe('');
  let parsed: unknown;
  expect(() => (parsed = JSON.parse(c.stdout)), `${label}: stdout is not one JSON document: ${JSON.stringify(c.stdout)}`).not.toThrow();
  expect(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed), `${label}: not an object: ${c.stdout}`).toBe(true);
  const reply = parsed as Record<string, unknown>;
  for (const [key, value] of Object.entries(reply)) {
    expect(Object.keys(FIELD_TYPES), `${label}: unknown field ${key}`).toContain(key);
    expect(value === null ? 'null' : typeof value, `${label}: type of ${key}`).toBe(FIELD_TYPES[key]);
  }
  expect(['Success', 'Failure', 'Not supported'], label).toContain(reply.status);
  if (reply.volumeNewSize !== undefined) expect(Number.isSafeInteger(reply.volumeNewSize), `${label}: volumeNewSize`).toBe(true);
  if (reply.capabilities !== undefined) {
    expect(Array.isArray(reply.capabilities), label).toBe(false);
    for (const [cap, value] of Object.entries(reply.capabilities as Record<string, unknown>)) {
      expect(Object.keys(DEFAULT_CAPABILITIES), `${label}: unknown capability ${cap}`).toContain(cap);
      expect(typeof value, `${label}: capability ${cap}`).toBe('boolean');
      expect(value, `${label}: capability ${cap} is sent although it is the default`).not.toBe(DEFAULT_CAPABILITIES[cap]);
    }
  }
  if (reply.status === 'Success') expect(c.exitCode, `${label}: exit code with Success`).toBe(0);
  if (reply.status === 'Failure') expect(c.exitCode, `${label}: exit code with Failure`).toBe(1);
  if (reply.status === 'Not supported') expect([0, 1], `${label}: exit code with Not supported`).toContain(c.exitCode);
  return reply;
}

export async function succeed(argv: string[], opts?: CallOptions): Promise<Record<string, unknown>> {
  const c = await call(argv, opts);
  const reply = replyOf(c);
  expect(reply.status, `${labelOf(c)}: ${c.stdout}`).toBe('Success');
  return reply;
}

export async function refused(argv: string[], fragment: string | RegExp, opts?: CallOptions): Promise<string> {
  const c = await call(argv, opts);
  const reply = replyOf(c);
  expect(reply, labelOf(c)).toEqual({ status: 'Failure', message: expect.any(String) });
  const message = String(reply.message);
  if (typeof fragment === 'string') expect(message).toContain(fragment);
  else expect(message).toMatch(fragment);
  return message;
}

export const useConfig = (settings: Record<string, unknown>) => writeFileSync(s.env.TWINVOL_CONFIG!, JSON.stringify(settings));
export const nonAttachable = () => useConfig({ flexAttach: false });

export function attachmentsOf(id: string): string[] {
  const v = JSON.parse(readFileSync(join(s.dataRoot, 'volumes', id, 'volume.json'), 'utf8')) as { attachments: { node: string }[] };
  return v.attachments.map((a) => a.node);
}

export function nodeRecordNames(): string[] {
  const dir = join(s.stateDir, 'mounts');
  return existsSync(dir) ? readdirSync(dir) : [];
}

/** How many mounts are stacked at exactly `path`. */
export const mountCount = (path: string) => readMounts().filter((m) => m.mountPoint === path).length;

/** Every path below `dir` (names only), for before/after comparisons. */
export function listing(dir: string, prefix = ''): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    out.push(`${prefix}${name}`);
    const path = join(dir, name);
    try {
      if (statSync(path).isDirectory()) out.push(...listing(path, `${prefix}${name}/`));
    } catch {
      // a dangling link
    }
  }
  return out;
}

/** A directory as kubelet makes it before mountdevice and mount: MkdirAll with mode 0750. */
export function kubeletMkdir(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o750 });
  chmodSync(path, 0o750);
  expect(readdirSync(path)).toEqual([]);
}

/** The attachable sequence for one pod, every reply checked for shape on the way. */
export async function attachAndMount(pv: string, opts: string, podUid: string, mountExtra: Record<string, string> = {}) {
  await succeed(['attach', opts, 'node-a']);
  const wait = await succeed(['waitforattach', '', opts]);
  const global = deviceMountPath(s.kubeletDir, pv);
  await succeed(['mountdevice', global, String(wait.device ?? ''), opts]);
  const dir = podVolumeDir(s.kubeletDir, podUid, pv);
  await succeed(['mount', dir, mountOptions(pv, pod(podUid), mountExtra)]);
  return { global, dir, device: String(wait.device ?? '') };
}
