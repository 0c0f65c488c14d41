// The FlexVolume protocol rules (as kubelet's pkg/volume/flexvolume applies them) that the other flex suites leave open: the reply
// kubelet parses (its fields, their types, stdout alone, nothing on stderr), the bare environment,
// side-effect-free init, the driver directory, children and deadlines, the dirs kubelet makes, never
// stacking a mount, Go-encoded options, reconstructed options, fsGroup, read-only, the expansion argv,
// idempotency of every verb and concurrency.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mountAt, readMounts } from '../../shared/mountinfo.js';
import { FLEX_BIN, flexOptions, flexSession, mountOptions, podNamed, reconstructedOptions } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, loopsUnder, mountsUnder, type Scratch } from '../helpers/scratch.js';

let s: Scratch;
/** What a test made outside its scratch (a mount helper in /usr/sbin, a daemon it left): undone even on failure. */
let undo: (() => void)[] = [];
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

const MiB = 2 ** 20;
const KUBELET_PATH = '/usr/bin:/bin';
const { createVolume } = flexSession(() => s.env);
const pod = podNamed;

// ---------------------------------------------------------------------------------------------------
// A kubelet-like runner that keeps stdout and stderr apart (kubelet joins them; the rule is that
// stderr stays empty) and times both the process exit and the close of the pipes, which is when
// kubelet's call really ends.

interface Call {
  argv: string[];
  exitCode: number;
  stdout: string;
  stderr: string;
  /** When the executable exited. */
  exitMs: number;
  /** When the last holder of its stdout/stderr let go: the end of the call for kubelet. */
  closeMs: number;
}

interface CallOptions {
  env?: Record<string, string>;
  bin?: string;
  cwd?: string;
  /** Give up (and kill the executable) after this long: a hang must fail the test, not stall it. */
  limitMs?: number;
}

function call(argv: string[], opts: CallOptions = {}): Promise<Call> {
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
const FIELD_TYPES: Record<string, string> = {
  status: 'string',
  message: 'string',
  device: 'string',
  volumeName: 'string',
  attached: 'boolean',
  volumeNewSize: 'number',
  capabilities: 'object',
};
const DEFAULT_CAPABILITIES: Record<string, boolean> = { attach: true, selinuxRelabel: true, supportsMetrics: false, fsGroup: true, requiresFSResize: true };

const labelOf = (c: Call) => `${c.argv[0]} ${JSON.stringify(c.argv.slice(1)).slice(0, 200)}`;

/**
 * The reply as kubelet would take it: stderr empty, stdout one JSON object, only known fields with
 * the types Go decodes (no null anywhere), capabilities only where they differ from the defaults, and
 * the exit code that goes with the status. Returns the reply.
 */
function replyOf(c: Call): Record<string, unknown> {
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

async function succeed(argv: string[], opts?: CallOptions): Promise<Record<string, unknown>> {
  const c = await call(argv, opts);
  const reply = replyOf(c);
  expect(reply.status, `${labelOf(c)}: ${c.stdout}`).toBe('Success');
  return reply;
}

async function refused(argv: string[], fragment: string | RegExp, opts?: CallOptions): Promise<string> {
  const c = await call(argv, opts);
  const reply = replyOf(c);
  expect(reply, labelOf(c)).toEqual({ status: 'Failure', message: expect.any(String) });
  const message = String(reply.message);
  if (typeof fragment === 'string') expect(message).toContain(fragment);
  else expect(message).toMatch(fragment);
  return message;
}

const useConfig = (settings: Record<string, unknown>) => writeFileSync(s.env.TWINVOL_CONFIG!, JSON.stringify(settings));
const nonAttachable = () => useConfig({ flexAttach: false });

function attachmentsOf(id: string): string[] {
  const v = JSON.parse(readFileSync(join(s.dataRoot, 'volumes', id, 'volume.json'), 'utf8')) as { attachments: { node: string }[] };
  return v.attachments.map((a) => a.node);
}

function nodeRecordNames(): string[] {
  const dir = join(s.stateDir, 'mounts');
  return existsSync(dir) ? readdirSync(dir) : [];
}

/** How many mounts are stacked at exactly `path`. */
const mountCount = (path: string) => readMounts().filter((m) => m.mountPoint === path).length;

/** Every path below `dir` (names only), for before/after comparisons. */
function listing(dir: string, prefix = ''): string[] {
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
function kubeletMkdir(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o750 });
  chmodSync(path, 0o750);
  expect(readdirSync(path)).toEqual([]);
}

/** The attachable sequence for one pod, every reply checked for shape on the way. */
async function attachAndMount(pv: string, opts: string, podUid: string, mountExtra: Record<string, string> = {}) {
  await succeed(['attach', opts, 'node-a']);
  const wait = await succeed(['waitforattach', '', opts]);
  const global = deviceMountPath(s.kubeletDir, pv);
  await succeed(['mountdevice', global, String(wait.device ?? ''), opts]);
  const dir = podVolumeDir(s.kubeletDir, podUid, pv);
  await succeed(['mount', dir, mountOptions(pv, pod(podUid), mountExtra)]);
  return { global, dir, device: String(wait.device ?? '') };
}

// ---------------------------------------------------------------------------------------------------

describe('the reply kubelet parses', () => {
  it('every verb, in every outcome, writes one JSON object of known, typed fields to stdout and nothing to stderr', async () => {
    await createVolume('vol-r', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-r', { volumeId: 'vol-r' });
    const global = deviceMountPath(s.kubeletDir, 'pv-r');
    const dir = podVolumeDir(s.kubeletDir, 'uid-r', 'pv-r');
    const expected: [string[], string, Record<string, unknown>?][] = [
      [['init'], 'Success', { capabilities: { fsGroup: false } }],
      [['getvolumename', opts], 'Success', { volumeName: 'vol-r' }],
      [['isattached', opts, 'node-a'], 'Success', { attached: false }],
      [['isattached', flexOptions('pv-none', { volumeId: 'no-such-volume' }), 'node-a'], 'Success', { attached: false }],
      [['attach', opts, 'node-a'], 'Success', { device: '' }],
      [['isattached', opts, 'node-a'], 'Success', { attached: true }],
      [['isattached', opts, 'node-b'], 'Success', { attached: false }],
      [['attach', opts, 'node-b'], 'Failure'],
      [['waitforattach', '', opts], 'Success', { device: '' }],
      [['mountdevice', global, '', opts], 'Success'],
      [['mount', dir, mountOptions('pv-r', pod('uid-r'))], 'Success'],
      [['expandvolume', opts, 'relative/path', String(2 * MiB), String(MiB)], 'Success', { volumeNewSize: 2 * MiB }],
      // Never shrinks: a smaller size answers the size it has.
      [['expandvolume', opts, 'relative/path', String(MiB), String(2 * MiB)], 'Success', { volumeNewSize: 2 * MiB }],
      [['expandfs', opts, '', global, String(2 * MiB), String(MiB)], 'Success', { volumeNewSize: 2 * MiB }],
      [['mount', dir, '{'], 'Failure'],
      [['mount'], 'Failure'],
      [['waitforattach', '', flexOptions('pv-none', { volumeId: 'no-such-volume' })], 'Failure'],
      [['unmountdevice', global], 'Failure'], // still published from
      [['unmount', dir], 'Success'],
      [['unmountdevice', global], 'Success'],
      [['detach', 'pv-r', 'node-a'], 'Success'],
      [['detach', '../x', 'node-a'], 'Failure'],
      [['isattached', opts, 'node-a'], 'Success', { attached: false }],
      [['getvolumestatistics', opts], 'Not supported'],
      [['attachdevice'], 'Not supported'],
    ];
    for (const [argv, status, fields] of expected) {
      const c = await call(argv);
      const reply = replyOf(c);
      expect(reply.status, `${labelOf(c)}: ${c.stdout}`).toBe(status);
      if (fields) expect(reply, labelOf(c)).toEqual({ status, ...fields });
    }
    expect(mountsUnder(s.root)).toEqual([]);
  });

  it('installed non-attachable, init says attach:false and nothing else that is a default', async () => {
    nonAttachable();
    expect(await succeed(['init'])).toEqual({ status: 'Success', capabilities: { attach: false, fsGroup: false } });
  });
});

describe('the environment kubelet gives', () => {
  const DEFAULT_DIRS = ['/run/twinvol', '/var/lib/twinvol'];

  it('answers init and unknown verbs with PATH alone (no HOME, no NODE_OPTIONS, no settings), from cwd /, touching no default dir', async () => {
    const before = DEFAULT_DIRS.map((d) => [d, existsSync(d), listing(d)]);
    const bare = { env: { PATH: KUBELET_PATH }, cwd: '/' };
    const init = await succeed(['init'], bare);
    if (!existsSync('/etc/twinvol/config.json')) expect(init).toEqual({ status: 'Success', capabilities: { fsGroup: false } });
    for (const verb of ['getvolumestatistics', 'frobnicate']) {
      expect(replyOf(await call([verb, '{}'], bare))).toEqual({ status: 'Not supported' });
    }
    expect(DEFAULT_DIRS.map((d) => [d, existsSync(d), listing(d)])).toEqual(before);
  });

  it('runs a whole non-attachable pod cycle with settings from the config file alone (PATH and TWINVOL_CONFIG)', async () => {
    useConfig({ flexAttach: false, dataRoot: s.dataRoot, stateDir: s.stateDir, kubeletDir: s.kubeletDir, nodeName: 'node-a' });
    await createVolume('vol-env', '--backend', 'dir', '--size', '1Mi');
    const bare = { env: { PATH: KUBELET_PATH, TWINVOL_CONFIG: s.env.TWINVOL_CONFIG! } };
    const dir = podVolumeDir(s.kubeletDir, 'uid-env', 'pv-env');
    await succeed(['mount', dir, mountOptions('pv-env', pod('uid-env'), { volumeId: 'vol-env' })], bare);
    expect(mountAt(dir)).toBeDefined();
    expect(attachmentsOf('vol-env')).toEqual(['node-a']);
    await succeed(['unmount', dir], bare);
    expect(mountsUnder(s.root)).toEqual([]);
    expect(attachmentsOf('vol-env')).toEqual([]);
  });

  it('init and unknown verbs are side-effect free: no state dir, no data root, nothing in the kubelet dir', async () => {
    for (const settings of [{}, { flexAttach: false }]) {
      useConfig(settings);
      for (let i = 0; i < 3; i++) await succeed(['init']);
      replyOf(await call(['frobnicate', '{}']));
      replyOf(await call(['getvolumestatistics', flexOptions('pv-x', { volumeId: 'vol-x' })]));
    }
    expect(existsSync(s.stateDir)).toBe(false);
    expect(existsSync(s.dataRoot)).toBe(false);
    expect(readdirSync(s.root).sort()).toEqual(['config.json', 'kubelet']);
    expect(readdirSync(s.kubeletDir)).toEqual([]);
  });

  // Once a bug: "help" and "--help" printed yargs usage text; any verb but kubelet's (and "volume") is Not supported.
  it('help and --help are not kubelet verbs: they answer Not supported, not usage text', async () => {
    for (const verb of ['help', '--help']) expect(replyOf(await call([verb]))).toEqual({ status: 'Not supported' });
  });
});

describe('the driver directory', () => {
  it('installed by a dot-named copy renamed into place, it runs alone and writes nothing beside itself; its log goes under the state dir', async () => {
    const driverDir = join(s.root, 'volumeplugins', 'acme~twinvol');
    mkdirSync(driverDir, { recursive: true });
    copyFileSync(FLEX_BIN, join(driverDir, '.twinvol.tmp'));
    chmodSync(join(driverDir, '.twinvol.tmp'), 0o755);
    renameSync(join(driverDir, '.twinvol.tmp'), join(driverDir, 'twinvol'));
    const bin = { bin: join(driverDir, 'twinvol') };

    await createVolume('vol-d', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-d', { volumeId: 'vol-d' });
    const global = deviceMountPath(s.kubeletDir, 'pv-d');
    const dir = podVolumeDir(s.kubeletDir, 'uid-d', 'pv-d');
    await succeed(['init'], bin);
    await succeed(['attach', opts, 'node-a'], bin);
    await succeed(['waitforattach', '', opts], bin);
    await succeed(['mountdevice', global, '', opts], bin);
    await succeed(['mount', dir, mountOptions('pv-d', pod('uid-d'))], bin);
    await refused(['mount', podVolumeDir(s.kubeletDir, 'uid-x', 'pv-x'), flexOptions('pv-x', { volumeId: 'vol-missing' })], 'does not exist', bin);
    await succeed(['unmount', dir], bin);
    await succeed(['unmountdevice', global], bin);
    await succeed(['detach', 'pv-d', 'node-a'], bin);
    replyOf(await call(['frobnicate'], bin));

    expect(readdirSync(dirname(driverDir))).toEqual(['acme~twinvol']);
    expect(readdirSync(driverDir)).toEqual(['twinvol']);
    const log = readFileSync(join(s.stateDir, 'log', 'flex.log'), 'utf8').split('\n').filter(Boolean);
    const calls = log.map((l) => JSON.parse(l) as { msg: string; call: string; status?: string }).filter((l) => l.msg === 'call');
    expect(calls.map((l) => `${l.call}:${l.status}`)).toEqual([
      'attach:Success',
      'waitforattach:Success',
      'mountdevice:Success',
      'mount:Success',
      'mount:Failure',
      'unmount:Success',
      'unmountdevice:Success',
      'detach:Success',
    ]);
  });
});

describe('children and deadlines', () => {
  /**
   * Installs `/sbin/mount.<type>` for a fresh filesystem type name, which mount(8) runs for
   * `-t <type>`, and returns the type. Removed after the test; the pid it writes is killed then.
   */
  function installMountHelper(body: (pidFile: string) => string): string {
    const type = `twvtest${randomBytes(4).toString('hex')}`;
    const helper = `/sbin/mount.${type}`;
    const pidFile = join(s.root, `${type}.pid`);
    writeFileSync(helper, `#!/bin/sh\n# twinvol test helper; called as: mount.${type} <source> <target> [-o options]\n${body(pidFile)}\n`, { mode: 0o755 });
    undo.push(() => rmSync(helper, { force: true }));
    undo.push(() => {
      const pid = Number(readFileSync(pidFile, 'utf8').trim());
      if (pid > 1) process.kill(pid, 'SIGKILL');
    });
    return type;
  }

  // Once a bug: the runner (then execa) waited for the captured pipes to close, not for the tool to exit,
  // so a mount helper that left a child holding them held the whole call, past its deadline.
  it('a mount helper that leaves a child holding its stdout and stderr does not hold the call', async () => {
    nonAttachable();
    const type = installMountHelper((pidFile) => `sleep 10 &\necho $! > ${pidFile}\nexec mount -i -t tmpfs -o size=1m tmpfs "$2"`);
    await createVolume('fusey', '--backend', 'static', '--source', 'tmpfs', '--fs-type', type);
    const dir = podVolumeDir(s.kubeletDir, 'uid-f', 'pv-f');
    const c = await call(['mount', dir, mountOptions('pv-f', pod('uid-f'), { volumeId: 'fusey' })]);
    expect(replyOf(c).status).toBe('Success');
    expect(mountAt(dir)?.fsType).toBe('tmpfs');
    expect(c.closeMs, 'the call waited for the daemon').toBeLessThan(8000);
  });

  // Once a bug, same root cause: a hung helper outlived commandTimeoutMs.
  it('a hung mount helper is cut off at commandTimeoutMs: the call ends soon after with Failure and mounts nothing', async () => {
    useConfig({ flexAttach: false, commandTimeoutMs: 1000 });
    const type = installMountHelper((pidFile) => `echo $$ > ${pidFile}\nexec sleep 10`);
    await createVolume('hung', '--backend', 'static', '--source', 'tmpfs', '--fs-type', type);
    const dir = podVolumeDir(s.kubeletDir, 'uid-h', 'pv-h');
    const c = await call(['mount', dir, mountOptions('pv-h', pod('uid-h'), { volumeId: 'hung' })]);
    const reply = replyOf(c);
    expect(reply.status).toBe('Failure');
    expect(String(reply.message)).toContain('within 1000 ms');
    expect(mountsUnder(s.root)).toEqual([]);
    expect(c.closeMs, 'the call outlived its deadline').toBeLessThan(6000);
  });
});

describe('the dirs kubelet makes and removes', () => {
  for (const backend of ['dir', 'block'] as const) {
    it(`accepts the empty 0750 dirs kubelet makes before mountdevice and mount (${backend})`, async () => {
      await createVolume('vol-k', '--backend', backend, '--size', '16Mi');
      const opts = flexOptions('pv-k', { volumeId: 'vol-k' });
      const global = deviceMountPath(s.kubeletDir, 'pv-k');
      const dir = podVolumeDir(s.kubeletDir, 'uid-k', 'pv-k');
      kubeletMkdir(global);
      kubeletMkdir(dir);
      await succeed(['attach', opts, 'node-a']);
      const wait = await succeed(['waitforattach', '', opts]);
      await succeed(['mountdevice', global, String(wait.device), opts]);
      await succeed(['mount', dir, mountOptions('pv-k', pod('uid-k'))]);
      expect(mountCount(global)).toBe(1);
      expect(mountCount(dir)).toBe(1);
      writeFileSync(join(dir, 'f'), 'through the pod');
      expect(readFileSync(join(global, 'f'), 'utf8')).toBe('through the pod');
      await succeed(['unmount', dir]);
      await succeed(['unmountdevice', global]);
      await succeed(['detach', 'pv-k', 'node-a']);
      expect(mountsUnder(s.root)).toEqual([]);
      expect(await loopsLeftUnder(s.root)).toEqual([]);
    });
  }

  it('creates missing dirs, parents included, for mountdevice and mount (attachable and not)', async () => {
    await createVolume('vol-m', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-m', { volumeId: 'vol-m' });
    const m = await attachAndMount('pv-m', opts, 'uid-m');
    expect(mountAt(m.global)).toBeDefined();
    expect(mountAt(m.dir)).toBeDefined();
    nonAttachable();
    await createVolume('vol-n', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-n', 'pv-n');
    expect(existsSync(join(s.kubeletDir, 'pods', 'uid-n'))).toBe(false);
    await succeed(['mount', dir, mountOptions('pv-n', pod('uid-n'), { volumeId: 'vol-n' })]);
    expect(mountAt(dir)).toBeDefined();
  });

  it('unmount and unmountdevice answer Success for dirs never mounted: made by kubelet, or absent', async () => {
    const made = { dir: podVolumeDir(s.kubeletDir, 'uid-e', 'pv-e'), global: deviceMountPath(s.kubeletDir, 'pv-e') };
    kubeletMkdir(made.dir);
    kubeletMkdir(made.global);
    const absent = { dir: podVolumeDir(s.kubeletDir, 'uid-a', 'pv-a'), global: deviceMountPath(s.kubeletDir, 'pv-a') };
    for (let i = 0; i < 2; i++) {
      for (const p of [made, absent]) {
        expect(await succeed(['unmount', p.dir])).toEqual({ status: 'Success' });
        expect(await succeed(['unmountdevice', p.global])).toEqual({ status: 'Success' });
      }
    }
    expect(existsSync(absent.dir) || existsSync(absent.global)).toBe(false);
    expect(mountsUnder(s.root)).toEqual([]);
  });
});

describe('never stacks a mount', () => {
  /** A bind mount from the same filesystem: st_dev of `path` equals its parent's, so only mountinfo sees it. */
  function foreignBind(path: string): string {
    const theirs = join(s.root, `theirs-${randomBytes(3).toString('hex')}`);
    mkdirSync(theirs);
    writeFileSync(join(theirs, 'theirs.txt'), 'not twinvol');
    kubeletMkdir(path);
    execFileSync('mount', ['--bind', theirs, path]);
    expect(statSync(path).dev).toBe(statSync(dirname(path)).dev);
    expect(mountCount(path)).toBe(1);
    return theirs;
  }

  it('refuses a global dir or pod dir that holds a same-filesystem bind mount, and leaves it alone', async () => {
    await createVolume('vol-s', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-s', { volumeId: 'vol-s' });
    await succeed(['attach', opts, 'node-a']);
    const global = deviceMountPath(s.kubeletDir, 'pv-s');
    foreignBind(global);
    await refused(['mountdevice', global, '', opts], `${global} already holds a mount twinvol did not make`);
    expect(mountCount(global)).toBe(1);
    expect(readFileSync(join(global, 'theirs.txt'), 'utf8')).toBe('not twinvol');

    // Staged at another path, the pod dir is the one held.
    const other = deviceMountPath(s.kubeletDir, 'pv-s2');
    await succeed(['mountdevice', other, '', opts]);
    const dir = podVolumeDir(s.kubeletDir, 'uid-s', 'pv-s');
    foreignBind(dir);
    await refused(['mount', dir, mountOptions('pv-s', pod('uid-s'))], `${dir} already holds a mount twinvol did not make`);
    expect(mountCount(dir)).toBe(1);
    expect(readdirSync(dir)).toEqual(['theirs.txt']);
  });

  it('non-attachable: refuses a pod dir held by a same-filesystem bind mount, staging nothing', async () => {
    nonAttachable();
    await createVolume('vol-s', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-s', 'pv-s');
    foreignBind(dir);
    await refused(['mount', dir, mountOptions('pv-s', pod('uid-s'), { volumeId: 'vol-s' })], 'already holds a mount twinvol did not make');
    expect(mountCount(dir)).toBe(1);
    expect(mountsUnder(s.root)).toEqual([dir]);
    expect(attachmentsOf('vol-s')).toEqual([]);
  });

  it('does not stack on its own mount when its record is gone (state dir lost, mount kept)', async () => {
    await createVolume('vol-o', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-o', { volumeId: 'vol-o' });
    await succeed(['attach', opts, 'node-a']);
    const global = deviceMountPath(s.kubeletDir, 'pv-o');
    await succeed(['mountdevice', global, '', opts]);
    rmSync(join(s.stateDir, 'mounts'), { recursive: true, force: true });
    const c = await call(['mountdevice', global, '', opts]);
    replyOf(c);
    expect(mountCount(global)).toBe(1);
  });
});

describe('options as kubelet\'s Go encoder writes them', () => {
  it('a PV option value with <, > and & arrives as \\u003c, \\u003e, \\u0026 and is used exactly (static source)', async () => {
    const source = join(s.root, 'src<a>&b');
    mkdirSync(source);
    writeFileSync(join(source, 'inside.txt'), 'found through an escaped path');
    await createVolume('vol-enc', '--backend', 'static', '--source', source, '--fs-type', 'none', '--mount-options', 'bind');
    // The PV repeats the source: twinvol compares it with the catalog's, so a wrong decoding is a Failure.
    const opts = flexOptions('pv-enc', { volumeId: 'vol-enc', source });
    expect(opts).toContain('src\\u003ca\\u003e\\u0026b');
    expect(opts).not.toMatch(/[<>&]/);
    const m = await attachAndMount('pv-enc', opts, 'uid-enc', { volumeId: 'vol-enc', source });
    expect(readFileSync(join(m.dir, 'inside.txt'), 'utf8')).toBe('found through an escaped path');
    expect(readFileSync(join(m.global, 'inside.txt'), 'utf8')).toBe('found through an escaped path');
    // A different source is refused, so the comparison above did happen.
    await refused(['getvolumename', flexOptions('pv-enc', { volumeId: 'vol-enc', source: `${source}x` })], 'option "source" does not match volume vol-enc');
  });

  it('createIfMissing records the decoded value, not the escape', async () => {
    // A host path chosen in a PV is allowed only under a root the administrator listed.
    useConfig({ flexAttach: false, staticSourceRoots: [s.root] });
    const source = join(s.root, 'made<&>here');
    mkdirSync(source);
    const dir = podVolumeDir(s.kubeletDir, 'uid-c', 'pv-c');
    await succeed(['mount', dir, mountOptions('pv-c', pod('uid-c'), { volumeId: 'vol-c', createIfMissing: 'true', backend: 'static', source, fsType: 'none', mountOptions: 'bind' })]);
    const record = JSON.parse(readFileSync(join(s.dataRoot, 'volumes/vol-c/volume.json'), 'utf8')) as { source: string };
    expect(record.source).toBe(source);
    writeFileSync(join(dir, 'w'), 'x');
    expect(readFileSync(join(source, 'w'), 'utf8')).toBe('x');
  });
});

describe('reconstructed options after a kubelet restart', () => {
  it('attachable: getvolumename and isattached resolve the volume from the PV name alone', async () => {
    await createVolume('vol-rc', '--backend', 'dir', '--size', '1Mi');
    await succeed(['attach', flexOptions('pv-rc', { volumeId: 'vol-rc' }), 'node-a']);
    const rec = reconstructedOptions('pv-rc');
    expect(await succeed(['getvolumename', rec])).toEqual({ status: 'Success', volumeName: 'vol-rc' });
    expect(await succeed(['isattached', rec, 'node-a'])).toEqual({ status: 'Success', attached: true });
    expect(await succeed(['isattached', rec, 'node-b'])).toEqual({ status: 'Success', attached: false });
  });

  it('attachable: a repeated mount with reconstructed options answers Success for the pod already mounted', async () => {
    await createVolume('vol-rc', '--backend', 'dir', '--size', '1Mi');
    const m = await attachAndMount('pv-rc', flexOptions('pv-rc', { volumeId: 'vol-rc' }), 'uid-rc', { volumeId: 'vol-rc' });
    await succeed(['mount', m.dir, mountOptions('pv-rc', pod('uid-rc'))]);
    expect(mountCount(m.dir)).toBe(1);
  });

  // Once a bug: only attach recorded which volume a PV names, so without attach a mount with
  // reconstructed options (the PV name, no volumeId) failed.
  it('non-attachable: a repeated mount with reconstructed options answers Success for the pod already mounted', async () => {
    nonAttachable();
    await createVolume('vol-rc', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-rc', 'pv-rc');
    await succeed(['mount', dir, mountOptions('pv-rc', pod('uid-rc'), { volumeId: 'vol-rc' })]);
    await succeed(['mount', dir, mountOptions('pv-rc', pod('uid-rc'))]);
    expect(mountCount(dir)).toBe(1);
  });
});

describe('fsGroup', () => {
  for (const key of ['kubernetes.io/mounterArgs.FsGroup', 'kubernetes.io/fsGroup']) {
    it(`${key} gives the volume root and its files the group, the root the setgid bit, both group read-write`, async () => {
      await createVolume('vol-g', '--size', '16Mi');
      const opts = flexOptions('pv-g', { volumeId: 'vol-g' });
      // A first pod (no fsGroup) leaves a root-owned file behind.
      const first = await attachAndMount('pv-g', opts, 'uid-g1');
      mkdirSync(join(first.dir, 'sub'));
      writeFileSync(join(first.dir, 'sub', 'old.txt'), 'root:root 0644', { mode: 0o644 });
      const second = podVolumeDir(s.kubeletDir, 'uid-g2', 'pv-g');
      await succeed(['mount', second, mountOptions('pv-g', pod('uid-g2'), { [key]: '4321' })]);
      for (const path of [second, join(second, 'sub')]) {
        const st = statSync(path);
        expect(st.gid, path).toBe(4321);
        expect(st.mode & 0o2000, `${path} setgid`).toBe(0o2000);
        expect(st.mode & 0o070, `${path} group rwx`).toBe(0o070);
      }
      const file = statSync(join(second, 'sub', 'old.txt'));
      expect(file.gid).toBe(4321);
      expect(file.mode & 0o060).toBe(0o060);
    });
  }

  it('non-attachable: the old kubernetes.io/fsGroup key is honoured too', async () => {
    nonAttachable();
    await createVolume('vol-g', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-g', 'pv-g');
    await succeed(['mount', dir, mountOptions('pv-g', pod('uid-g'), { volumeId: 'vol-g', 'kubernetes.io/fsGroup': '2345' })]);
    expect(statSync(dir).gid).toBe(2345);
    expect(statSync(dir).mode & 0o2000).toBe(0o2000);
  });
});

describe('read-only', () => {
  const expectReadOnly = (path: string) => {
    expect(mountAt(path)?.mountOptions, path).toContain('ro');
    expect(() => writeFileSync(join(path, 'nope'), 'x'), path).toThrow(/EROFS|read-only/);
  };

  it('non-attachable: kubernetes.io/readwrite ro and the PV option readOnly both mount the pod read-only', async () => {
    nonAttachable();
    await createVolume('vol-ro', '--backend', 'dir', '--size', '1Mi');
    const rw = podVolumeDir(s.kubeletDir, 'uid-rw', 'pv-ro');
    await succeed(['mount', rw, mountOptions('pv-ro', pod('uid-rw'), { volumeId: 'vol-ro' })]);
    writeFileSync(join(rw, 'f'), 'written rw');
    const ro1 = podVolumeDir(s.kubeletDir, 'uid-ro1', 'pv-ro');
    await succeed(['mount', ro1, mountOptions('pv-ro', pod('uid-ro1'), { volumeId: 'vol-ro', 'kubernetes.io/readwrite': 'ro' })]);
    const ro2 = podVolumeDir(s.kubeletDir, 'uid-ro2', 'pv-ro');
    await succeed(['mount', ro2, mountOptions('pv-ro', pod('uid-ro2'), { volumeId: 'vol-ro', readOnly: 'true' })]);
    for (const ro of [ro1, ro2]) {
      expectReadOnly(ro);
      expect(readFileSync(join(ro, 'f'), 'utf8')).toBe('written rw');
    }
    // The read-write pod is not made read-only by its neighbours.
    writeFileSync(join(rw, 'g'), 'still writable');
  });

  it('attachable: ro reaches mountdevice and mount', async () => {
    await createVolume('vol-ro', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-ro', { volumeId: 'vol-ro' }, 'ro');
    const m = await attachAndMount('pv-ro', opts, 'uid-ro', { 'kubernetes.io/readwrite': 'ro' });
    expectReadOnly(m.global);
    expectReadOnly(m.dir);
  });
});

describe('waitforattach, detach and the expansion argv', () => {
  it('waitforattach takes attach\'s "" or a stale device and replies the real one', async () => {
    await createVolume('vol-w', '--size', '16Mi');
    const opts = flexOptions('pv-w', { volumeId: 'vol-w' });
    expect(await succeed(['attach', opts, 'node-a'])).toEqual({ status: 'Success', device: '' });
    const first = await succeed(['waitforattach', '', opts]);
    expect(first.device).toMatch(/^\/dev\/loop\d+$/);
    expect(await succeed(['waitforattach', '/dev/loop-stale', opts])).toEqual(first);
    expect(loopsUnder(s.root)).toEqual([first.device]);
    await succeed(['mountdevice', deviceMountPath(s.kubeletDir, 'pv-w'), String(first.device), opts]);
    await succeed(['unmountdevice', deviceMountPath(s.kubeletDir, 'pv-w')]);
    // detach names the PV, which is not the volume id: the attachment still goes.
    expect(attachmentsOf('vol-w')).toEqual(['node-a']);
    await succeed(['detach', 'pv-w', 'node-a']);
    expect(attachmentsOf('vol-w')).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });

  it('expandvolume never uses its deviceMountPath: relative, hostile or empty, it grows the image and touches no path', async () => {
    await createVolume('vol-x', '--size', '16Mi');
    const opts = flexOptions('pv-x', { volumeId: 'vol-x' });
    const image = join(s.dataRoot, 'volumes/vol-x/image.img');
    const relative = 'plugins/kubernetes.io/flexvolume/acme/twinvol/mounts/pv-x';
    expect(existsSync(`/${relative.split('/')[0]}`)).toBe(false);
    const before = listing(s.root);
    const sizes: [string, number][] = [
      [relative, 24 * MiB],
      ['../../../../etc', 32 * MiB],
      ['', 40 * MiB],
    ];
    for (const [path, size] of sizes) {
      const reply = await succeed(['expandvolume', opts, path, String(size), String(16 * MiB)]);
      expect(reply).toEqual({ status: 'Success', volumeNewSize: size });
      expect(statSync(image).size).toBe(size);
    }
    expect(existsSync(`/${relative.split('/')[0]}`)).toBe(false);
    // Only the call log was added.
    expect(listing(s.root).filter((p) => !['state', 'state/log', 'state/log/flex.log'].includes(p))).toEqual(before);
  });
});

describe('idempotency of every verb', () => {
  async function sameEachTime(argv: string[], times = 3): Promise<Record<string, unknown>> {
    const outputs: string[] = [];
    let reply: Record<string, unknown> = {};
    for (let i = 0; i < times; i++) {
      const c = await call(argv);
      reply = replyOf(c);
      expect(reply.status, `${labelOf(c)}: ${c.stdout}`).toBe('Success');
      outputs.push(c.stdout);
    }
    expect(new Set(outputs).size, `${argv[0]} answered differently when repeated: ${outputs.join(' | ')}`).toBe(1);
    return reply;
  }

  it('init, getvolumename, isattached, expandvolume and expandfs answer the same when repeated', async () => {
    await createVolume('vol-i', '--size', '320Mi', '--fs-type', 'xfs');
    const opts = flexOptions('pv-i', { volumeId: 'vol-i' });
    await sameEachTime(['init']);
    await sameEachTime(['getvolumename', opts]);
    expect((await sameEachTime(['isattached', opts, 'node-a'])).attached).toBe(false);
    const m = await attachAndMount('pv-i', opts, 'uid-i');
    expect((await sameEachTime(['isattached', opts, 'node-a'])).attached).toBe(true);
    const size = String(640 * MiB);
    expect((await sameEachTime(['expandvolume', opts, 'relative/path', size, String(320 * MiB)])).volumeNewSize).toBe(640 * MiB);
    const blocks = () => {
      const out = execFileSync('stat', ['-f', '-c', '%b %S', m.dir]).toString().trim().split(' ').map(Number);
      return out[0]! * out[1]!;
    };
    const before = blocks();
    expect((await sameEachTime(['expandfs', opts, m.device, m.global, size, String(320 * MiB)])).volumeNewSize).toBe(640 * MiB);
    expect(blocks()).toBeGreaterThan(before * 1.8);
  });

  it('non-attachable mount and unmount answer the same when repeated, with one mount and one release', async () => {
    nonAttachable();
    await createVolume('vol-i', '--size', '16Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-i', 'pv-i');
    await sameEachTime(['mount', dir, mountOptions('pv-i', pod('uid-i'), { volumeId: 'vol-i' })]);
    expect(mountCount(dir)).toBe(1);
    expect(mountsUnder(s.root)).toHaveLength(2); // the pod and twinvol's own staging
    await sameEachTime(['unmount', dir]);
    expect(mountsUnder(s.root)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    expect(attachmentsOf('vol-i')).toEqual([]);
  });
});

describe('concurrency', () => {
  it('concurrent identical mounts of one pod dir make one mount; concurrent unmounts release it all', async () => {
    nonAttachable();
    await createVolume('vol-c', '--size', '16Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-c', 'pv-c');
    const mounts = await Promise.all(Array.from({ length: 6 }, () => call(['mount', dir, mountOptions('pv-c', pod('uid-c'), { volumeId: 'vol-c' })])));
    expect(mounts.map((c) => replyOf(c).status)).toEqual(mounts.map(() => 'Success'));
    expect(mountCount(dir)).toBe(1);
    expect(loopsUnder(s.root)).toHaveLength(1);
    expect(nodeRecordNames()).toHaveLength(2);
    const unmounts = await Promise.all(Array.from({ length: 6 }, () => call(['unmount', dir])));
    expect(unmounts.map((c) => replyOf(c).status)).toEqual(unmounts.map(() => 'Success'));
    expect(mountsUnder(s.root)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    expect(nodeRecordNames()).toEqual([]);
    expect(attachmentsOf('vol-c')).toEqual([]);
  });

  it('isattached always answers a bool while attach and detach of the same volume run beside it', async () => {
    await createVolume('vol-p', '--backend', 'dir', '--size', '1Mi');
    const opts = flexOptions('pv-p', { volumeId: 'vol-p' });
    const polls: Call[] = [];
    for (let round = 0; round < 4; round++) {
      const [attach, ...a] = await Promise.all([call(['attach', opts, 'node-a']), ...[0, 1, 2].map(() => call(['isattached', opts, 'node-a']))]);
      expect(replyOf(attach!).status).toBe('Success');
      const [detach, ...d] = await Promise.all([call(['detach', 'pv-p', 'node-a']), ...[0, 1, 2].map(() => call(['isattached', opts, 'node-a']))]);
      expect(replyOf(detach!).status).toBe('Success');
      polls.push(...a, ...d);
    }
    expect(polls).toHaveLength(24);
    for (const c of polls) expect(typeof replyOf(c).attached, labelOf(c)).toBe('boolean');
    expect(attachmentsOf('vol-p')).toEqual([]);
  });
});

describe('a failed call leaves the volume as it found it', () => {
  // Once a bug: a non-attachable mount whose staging failed kept the attachment, the loop device and
  // the dirs it had made.
  it('non-attachable: a mount whose staging fails releases the attachment, the loop device and the dirs it made', async () => {
    nonAttachable();
    await createVolume('keep', '--size', '32Mi', '--fs-type', 'xfs');
    execFileSync('mkfs.ext4', ['-q', '-F', join(s.dataRoot, 'volumes/keep/image.img')]);
    const dir = podVolumeDir(s.kubeletDir, 'uid-k', 'pv-k');
    await refused(['mount', dir, mountOptions('pv-k', pod('uid-k'), { volumeId: 'keep' })], 'holds a ext4 filesystem, not xfs');
    await succeed(['unmount', dir]);
    expect(mountsUnder(s.root)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    expect(nodeRecordNames()).toEqual([]);
    expect(attachmentsOf('keep')).toEqual([]);
    expect(existsSync(join(s.stateDir, 'staging', 'keep'))).toBe(false);
  });
});
