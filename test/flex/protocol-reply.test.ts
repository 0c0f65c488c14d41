// FlexVolume protocol rules, as kubelet's pkg/volume/flexvolume applies them, that the other flex
// suites leave open: the reply kubelet parses, the bare environment, side-effect-free init, the driver
// directory, children and deadlines. The world they run in is test/flex/helpers/kubelet-world.ts.
import { killIfStill } from '../helpers/kill-if-still.js';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountAt } from '../../shared/mountinfo.js';
import { FLEX_BIN, flexOptions, mountOptions, SEA_PASS } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { mountsUnder } from '../helpers/scratch.js';
import { attachmentsOf, call, createVolume, KUBELET_PATH, labelOf, listing, MiB, nonAttachable, pod, refused, replyOf, s, succeed, undo, useConfig, useKubeletWorld } from './helpers/kubelet-world.js';

useKubeletWorld();

// test/sea/flex-protocol-reply.test.ts runs this file again against the single executable; tests marked
// it.skipIf(SEA_PASS) test the core rather than the executable, and run once, in the bundle's pass.

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

  // Once a bug: "help" printed yargs usage text; any word but kubelet's verbs and the admin commands is
  // Not supported. A word that starts with "-", which kubelet never sends, is a person's command line
  // (flex/verb-names.ts isAdminCommand): --help answers with usage, a malformed flag with one line, exit 2
  // (test/flex/cli.test.ts), and neither is ever taken for a reply.
  it('help and other unknown words are not kubelet verbs: they answer Not supported, not usage text', async () => {
    for (const verb of ['help', 'version', 'Init', 'HELP']) expect(replyOf(await call([verb]))).toEqual({ status: 'Not supported' });
    const flag = await call(['--HELP']);
    expect(flag).toMatchObject({ exitCode: 2, stdout: '' });
    expect(flag.stderr.trimEnd().split('\n')).toHaveLength(1);
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
      // Each helper's pid is a `sleep 10`, likely killed by the call's deadline already: never a pid reused since.
      killIfStill(pid, (argv) => argv[0] === 'sleep' && argv[1] === '10');
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
  it.skipIf(SEA_PASS)('a hung mount helper is cut off at commandTimeoutMs: the call ends soon after with Failure and mounts nothing', async () => {
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
