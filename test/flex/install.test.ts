import { spawn } from 'node:child_process';
import { chmodSync, closeSync, copyFileSync, existsSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { MIN_NODE } from '../../flex/node-shebang.js';
import { type Collected, collect } from '../helpers/collect.js';
import { FLEX_BIN, FLEX_BUILDS, flexSession, mountOptions, podNamed, runAdmin, runFlex } from '../helpers/flex-runner.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';
import { NATIVE_MOUNT_FILE } from '../../shared/native-mount.js';

// `twinvol install flex` / `uninstall flex` (issue 11, item 2): kubelet probes its plugin directory
// on every change and may run the driver at any moment, so the file appears whole and executable or
// not at all.
let s: Scratch;
let pluginDir: string;
let installed: string;
beforeEach(() => {
  s = createScratch('node-a');
  pluginDir = join(s.root, 'plugins');
  installed = join(pluginDir, 'acme~twinvol/twinvol');
});
afterEach(() => s.cleanup());

const targetArgs = () => ['--plugin-dir', pluginDir, '--vendor', 'acme'];
const install = (...extra: string[]) => runAdmin(s.env, ['install', 'flex', ...targetArgs(), ...extra]);
const uninstall = (...extra: string[]) => runAdmin(s.env, ['uninstall', 'flex', ...targetArgs(), ...extra]);
const bundle = () => readFileSync(FLEX_BIN);
/** The mount addon beside the installed driver (shared/native-mount.ts), copied from beside the bundle. */
const addon = () => join(pluginDir, 'acme~twinvol', NATIVE_MOUNT_FILE);
/**
 * What install prints for the bundle: the file of commands kubelet never runs first, then the mount
 * addon, then the driver (flex/install.ts).
 */
const placed = (verb: string, addonVerb = verb) =>
  `${verb}: ${installed}.modules (the commands kubelet never runs)\n${addonVerb}: ${addon()} (mount(2) for the driver)\n${verb}: ${installed} (kubelet driver acme/twinvol)\n`;

/** Runs an installer from a copy of the bundle at `path`: install copies the file it runs from. */
function installFrom(path: string): Promise<number | null> {
  return new Promise((done, fail) => {
    const child = spawn(path, ['install', 'flex', ...targetArgs()], { stdio: 'ignore', env: { PATH: '/usr/bin:/bin', ...s.env } });
    child.on('error', fail);
    child.on('exit', done);
  });
}

describe('twinvol install flex', () => {
  it('puts this executable at <plugin-dir>/<vendor>~twinvol/twinvol, 0755, its modules beside it, and it answers init there', async () => {
    const r = await install();
    expect(r).toEqual({ exitCode: 0, stdout: placed('installed'), stderr: '' });
    expect(readFileSync(installed).equals(bundle())).toBe(true);
    expect(statSync(installed).mode & 0o7777).toBe(0o755);
    expect(readFileSync(`${installed}.modules`).equals(readFileSync(`${FLEX_BIN}.modules`))).toBe(true);
    expect(statSync(`${installed}.modules`).mode & 0o7777).toBe(0o644);
    expect(readFileSync(addon()).equals(readFileSync(join(dirname(FLEX_BIN), NATIVE_MOUNT_FILE)))).toBe(true);
    expect(readdirSync(join(pluginDir, 'acme~twinvol'))).toEqual(['twinvol', NATIVE_MOUNT_FILE, 'twinvol.modules']);
    // The installed copy's own CLI, whose modules are the ones installed beside it.
    expect(await collect(installed, ['--version'], { env: { PATH: '/usr/bin:/bin', ...s.env } })).toMatchObject({ code: 0, stdout: expect.stringMatching(/^twinvol \d+\.\d+\.\d+\n$/) });
    const init = await new Promise<string>((done) => {
      const child = spawn(installed, ['init'], { env: { PATH: '/usr/bin:/bin', TWINVOL_CONFIG: s.env.TWINVOL_CONFIG! } });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.on('close', () => done(out));
    });
    expect(JSON.parse(init)).toEqual({ status: 'Success', capabilities: { fsGroup: false } });
  });

  it('run through a symlink, installs the file the link points to, with the modules beside that file (and no addon, having none)', async () => {
    const real = join(s.root, 'opt/twinvol');
    mkdirSync(dirname(real), { recursive: true });
    copyFileSync(FLEX_BIN, real);
    copyFileSync(`${FLEX_BIN}.modules`, `${real}.modules`);
    chmodSync(real, 0o755);
    const link = join(s.root, 'bin/twinvol');
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(real, link);
    expect(await installFrom(link)).toBe(0);
    expect(readdirSync(join(pluginDir, 'acme~twinvol'))).toEqual(['twinvol', 'twinvol.modules']);
    expect(readFileSync(`${installed}.modules`).equals(readFileSync(`${FLEX_BIN}.modules`))).toBe(true);
  });

  it('is idempotent: the same file and config are not rewritten (no inode change, no probe event)', async () => {
    const config = '{"flexAttach":false}';
    expect((await install('--config', config)).stdout).toBe(`${placed('installed')}written: ${s.env.TWINVOL_CONFIG}\n`);
    const before = { driver: statSync(installed), modules: statSync(`${installed}.modules`), config: statSync(s.env.TWINVOL_CONFIG!) };
    const again = await install('--config', config);
    expect(again).toEqual({ exitCode: 0, stdout: `${placed('unchanged')}unchanged: ${s.env.TWINVOL_CONFIG}\n`, stderr: '' });
    expect(statSync(installed).ino).toBe(before.driver.ino);
    expect(statSync(`${installed}.modules`).ino).toBe(before.modules.ino);
    expect(statSync(s.env.TWINVOL_CONFIG!).ino).toBe(before.config.ino);
    expect(readFileSync(s.env.TWINVOL_CONFIG!, 'utf8')).toBe(`${config}\n`);
    // The executable answers from the config it installed.
    expect((await runFlex(s.env, ['init'])).reply).toEqual({ status: 'Success', capabilities: { attach: false, fsGroup: false } });
  });

  it('repairs a file that is not what it should be (another content, or not executable)', async () => {
    mkdirSync(join(pluginDir, 'acme~twinvol'), { recursive: true });
    writeFileSync(installed, 'half a file');
    expect((await install()).stdout).toMatch(/^installed: /);
    expect(readFileSync(installed).equals(bundle())).toBe(true);
    chmodSync(installed, 0o644);
    expect((await install()).stdout).toBe(`unchanged: ${installed}.modules (the commands kubelet never runs)\nunchanged: ${addon()} (mount(2) for the driver)\ninstalled: ${installed} (kubelet driver acme/twinvol)\n`);
    expect(statSync(installed).mode & 0o7777).toBe(0o755);
  });

  it('a reader polling the destination during repeated installs never sees a partial or non-executable file', async () => {
    // Two different executables to install in turn, so every install replaces the file.
    const a = join(s.root, 'a/twinvol');
    const b = join(s.root, 'b/twinvol');
    mkdirSync(join(s.root, 'a'));
    mkdirSync(join(s.root, 'b'));
    copyFileSync(FLEX_BIN, a);
    writeFileSync(b, Buffer.concat([bundle(), Buffer.from('\n// the same driver, one line longer\n')]));
    // Each installer runs its install command from the modules beside it.
    for (const copy of [a, b]) copyFileSync(`${FLEX_BIN}.modules`, `${copy}.modules`);
    chmodSync(a, 0o755);
    chmodSync(b, 0o755);
    const versions = [readFileSync(a), readFileSync(b)];
    const seen = { missing: 0, a: 0, b: 0, bad: [] as string[] };
    let installing = true;
    const reader = (async () => {
      const buf = Buffer.alloc(versions[1]!.length + 1);
      while (installing) {
        let fd: number;
        try {
          fd = openSync(installed, 'r');
        } catch {
          seen.missing++;
          await tick();
          continue;
        }
        try {
          // One open file: its mode and its bytes belong to the same inode.
          const mode = fstatSync(fd).mode & 0o7777;
          let n = 0;
          for (let r; (r = readSync(fd, buf, n, buf.length - n, n)) > 0; ) n += r;
          const got = buf.subarray(0, n);
          const which = versions.findIndex((v) => v.equals(got));
          if (which < 0 || mode !== 0o755) seen.bad.push(`${n} bytes, mode ${mode.toString(8)}`);
          else if (which === 0) seen.a++;
          else seen.b++;
        } finally {
          closeSync(fd);
        }
        await tick();
      }
    })();
    const rounds = process.env.TWINVOL_LONG ? 60 : 8;
    try {
      for (let i = 0; i < rounds; i++) expect(await installFrom(i % 2 ? b : a)).toBe(0);
    } finally {
      installing = false;
      await reader;
    }
    expect(seen.bad).toEqual([]);
    // The reader did overlap the installs: it saw both versions (else the test proved nothing).
    expect(seen.a).toBeGreaterThan(0);
    expect(seen.b).toBeGreaterThan(0);
    expect(readdirSync(join(pluginDir, 'acme~twinvol'))).toEqual(['twinvol', 'twinvol.modules']);
  });

  it.each([
    [['--vendor', 'a~b'], /--vendor "a~b" must be 1 to 63 letters/],
    [['--vendor', '.hidden'], /--vendor ".hidden" must be/],
    [['--plugin-dir', 'relative/dir'], /--plugin-dir "relative\/dir" must be an absolute, normalised path/],
    [['--config', '{"bogus": 1}'], /unknown setting "bogus"/],
    [['--config', '{"flexAttach": "no"}'], /setting flexAttach must be true or false/],
    [['--config', '/nonexistent/config.json'], /--config "\/nonexistent\/config.json" is neither JSON nor a readable file \(ENOENT\)/],
    [['--bogus'], /Unknown argument: bogus/],
  ])('%j: exit 2, one line, nothing installed and no config written', async (args, reason) => {
    const configBefore = readFileSync(s.env.TWINVOL_CONFIG!, 'utf8');
    const r = await install(...args);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^twinvol: [^\n]+\n$/);
    expect(r.stderr).toMatch(reason);
    expect(existsSync(pluginDir)).toBe(false);
    expect(readFileSync(s.env.TWINVOL_CONFIG!, 'utf8')).toBe(configBefore);
  });

  it('a config that cannot be written leaves nothing installed: kubelet never runs the driver without it', async () => {
    const notADir = join(s.root, 'plain-file');
    writeFileSync(notADir, '');
    const r = await runAdmin({ ...s.env, TWINVOL_CONFIG: join(notADir, 'config.json') }, ['install', 'flex', ...targetArgs(), '--config', '{"flexAttach":false}']);
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^twinvol: cannot create directory [^\n]*plain-file[^\n]*\n$/);
    expect(existsSync(installed)).toBe(false);
  });
});

describe('twinvol uninstall flex', () => {
  const { ok, createVolume } = flexSession(() => s.env);

  it('removes the driver, its modules and its directory; a second uninstall says it is already gone', async () => {
    await install();
    expect(await uninstall()).toEqual({ exitCode: 0, stdout: `removed: ${installed}\n`, stderr: '' });
    expect(readdirSync(pluginDir)).toEqual([]);
    expect(await uninstall()).toEqual({ exitCode: 0, stdout: `already gone: ${installed} was not installed\n`, stderr: '' });
  });

  it('is refused while a twinvol volume is mounted on this node, unless forced', async () => {
    writeFileSync(s.env.TWINVOL_CONFIG!, JSON.stringify({ flexAttach: false }));
    await install();
    await createVolume('in-use', '--backend', 'dir', '--size', '1Mi');
    const dir = podVolumeDir(s.kubeletDir, 'uid-1', 'pv-in-use');
    await ok('mount', dir, mountOptions('pv-in-use', podNamed('uid-1'), { volumeId: 'in-use' }));

    const refused = await uninstall();
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toMatch(/^twinvol: 1 twinvol mount is still in place on this node \(volume in-use\); kubelet needs the driver to tear it down \(--force removes it anyway\)\n$/);
    expect(existsSync(installed)).toBe(true);

    // kubelet tears the pod down with the driver still there; then uninstall goes through.
    await ok('unmount', dir);
    expect((await uninstall()).stdout).toBe(`removed: ${installed}\n`);

    await install();
    await ok('mount', dir, mountOptions('pv-in-use', podNamed('uid-1'), { volumeId: 'in-use' }));
    expect(await uninstall('--force')).toEqual({ exitCode: 0, stdout: `removed: ${installed} (forced: 1 mount still in place)\n`, stderr: '' });
    expect(existsSync(installed)).toBe(false);
  });

  // Once taken as its default: a --vendor or --plugin-dir whose value a script left empty (unquoted)
  // installed or removed the driver of another vendor, or in kubelet's default plugin dir.
  it('a --vendor or --plugin-dir without its value is refused, not taken as the default: nothing installed or removed', async () => {
    const r = await runAdmin(s.env, ['install', 'flex', '--plugin-dir', pluginDir, '--vendor']);
    expect(r).toEqual({ exitCode: 2, stdout: '', stderr: 'twinvol: Not enough arguments following: vendor (see: twinvol --help)\n' });
    expect(existsSync(pluginDir)).toBe(false);
    // The default vendor's driver, in place: an uninstall that forgot its vendor leaves it.
    expect((await runAdmin(s.env, ['install', 'flex', '--plugin-dir', pluginDir])).exitCode).toBe(0);
    const defaultDriver = join(pluginDir, 'twinvol~twinvol/twinvol');
    expect(existsSync(defaultDriver)).toBe(true);
    // (--plugin-dir alone is not tried here: the old parser would have gone to this host's real one.)
    const u = await runAdmin(s.env, ['uninstall', 'flex', '--plugin-dir', pluginDir, '--vendor']);
    expect(u).toEqual({ exitCode: 2, stdout: '', stderr: 'twinvol: Not enough arguments following: vendor (see: twinvol --help)\n' });
    expect(existsSync(defaultDriver)).toBe(true);
  });

  it.each([[['--vendor', 'a/b']], [['--plugin-dir', '/a/../b']], [['--force=maybe', '--bogus']]])('%j: exit 2, one line, nothing removed', async (args) => {
    await install();
    const r = await uninstall(...args);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^twinvol: [^\n]+\n$/);
    expect(existsSync(installed)).toBe(true);
  });
});

// `twinvol install flex --node <path>` (flex/node-shebang.ts): the installed bundle's first line
// names that Node, so the kernel execs it directly instead of env, which then looks node up on
// kubelet's PATH. The bundle alone: a single executable has no first line to change.
const BUNDLE = FLEX_BUILDS.bundle;
const SEA = FLEX_BUILDS.sea;
const installWith = (bin: string, ...extra: string[]) => collect(bin, ['install', 'flex', '--plugin-dir', pluginDir, '--vendor', 'acme', ...extra], { env: { PATH: '/usr/bin:/bin', ...s.env } });
/** kubelet's call, with a PATH on which there is no node at all. */
const initWithoutNodeOnPath = () => collect(installed, ['init'], { env: { PATH: join(s.root, 'empty-bin'), TWINVOL_CONFIG: s.env.TWINVOL_CONFIG! } });
const firstLine = (path: string) => readFileSync(path, 'latin1').split('\n', 1)[0];

/** A link to this Node under the scratch root, at `dir`/node. */
function linkedNode(dir: string): string {
  mkdirSync(join(s.root, dir), { recursive: true });
  const link = join(s.root, dir, 'node');
  if (!existsSync(link)) symlinkSync(process.execPath, link);
  return link;
}

/** The installed driver runs a CLI command (the modules beside it) and a verb that loads the dispatcher, with no node on PATH. */
async function expectVerbsRun(): Promise<void> {
  const made = await collect(installed, ['volume', 'create', 'vol-1', '--backend', 'dir', '--size', '1Mi'], { env: { PATH: '/usr/bin:/bin', ...s.env } });
  expect(made.code, made.stderr).toBe(0);
  const env = { ...s.env, PATH: join(s.root, 'empty-bin') };
  const named = await collect(installed, ['getvolumename', '{"volumeId":"vol-1","kubernetes.io/pvOrVolumeName":"pv-1"}'], { env });
  expect(JSON.parse(named.stdout), named.stdout + named.stderr).toEqual({ status: 'Success', volumeName: 'vol-1' });
}

/** An executable shell script at `name` under the scratch root that prints `version` for --version. */
function fakeNode(name: string, body: string): string {
  const path = join(s.root, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

/** A refusal of the command line: exit 2, one line naming the flag, and nothing installed. */
function expectUsageError(r: Collected, words: RegExp): void {
  expect(r.code).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr).toMatch(/^twinvol: --node .*\(see: twinvol --help\)\n$/);
  expect(r.stderr).toMatch(words);
  expect(existsSync(pluginDir)).toBe(false);
}

describe('twinvol install flex --node', () => {
  it('names that node in the first line, keeps the code byte for byte, and the driver runs with no node on PATH', async () => {
    const r = await installWith(BUNDLE, '--node', process.execPath);
    expect(r.code).toBe(0);
    const bundle = readFileSync(BUNDLE);
    const copy = readFileSync(installed);
    expect(firstLine(BUNDLE)).toBe('#!/usr/bin/env -S node --no-warnings');
    expect(firstLine(installed)).toBe(`#!${process.execPath} --no-warnings`);
    // All but the first line and the last, the packed modules' index, whose offsets move with the first.
    const code = (b: Buffer) => b.subarray(b.indexOf(0x0a) + 1, b.lastIndexOf(0x0a, b.length - 2));
    expect(code(copy).equals(code(bundle))).toBe(true);
    expect(statSync(installed).mode & 0o7777).toBe(0o755);
    expect(JSON.parse((await initWithoutNodeOnPath()).stdout)).toEqual({ status: 'Success', capabilities: { fsGroup: false } });
    await expectVerbsRun();
  });

  // init is the one verb that runs without the dispatcher, which the executable carries at offsets its
  // index counts from the file's start: a first line of another length once broke every other verb
  // ("Decompression failed"), shorter (/usr/bin/node) or longer (a path under the scratch root).
  it.each([['shorter', () => process.execPath], ['longer', () => linkedNode('a-rather-long-directory-name/for-node/bin')]])(
    'with a first line %s than the env line, the verbs that run the dispatcher and the CLI beside it run too',
    async (_, node) => {
      expect((await installWith(BUNDLE, '--node', node())).code).toBe(0);
      await expectVerbsRun();
    },
  );

  it('without it, the same call needs node on PATH: what --node saves kubelet from', async () => {
    expect((await installWith(BUNDLE)).code).toBe(0);
    const r = await initWithoutNodeOnPath();
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/env: .*node.*: No such file or directory/);
  });

  it('is idempotent, and an install without it puts the env line back', async () => {
    expect((await installWith(BUNDLE, '--node', process.execPath)).code).toBe(0);
    const ino = statSync(installed).ino;
    const again = await installWith(BUNDLE, '--node', process.execPath);
    expect(again.stdout).toContain(`unchanged: ${installed} (kubelet driver acme/twinvol)`);
    expect(statSync(installed).ino).toBe(ino);
    expect((await installWith(BUNDLE)).stdout).toContain(`installed: ${installed} (kubelet driver acme/twinvol)`);
    expect(readFileSync(installed).equals(readFileSync(BUNDLE))).toBe(true);
  });

  it('keeps a link as given, not where it points: a package upgrade moves the target, not the link', async () => {
    const link = join(s.root, 'bin/node');
    mkdirSync(join(s.root, 'bin'));
    symlinkSync(process.execPath, link);
    expect((await installWith(BUNDLE, '--node', link)).code).toBe(0);
    expect(firstLine(installed)).toBe(`#!${link} --no-warnings`);
    expect((await initWithoutNodeOnPath()).code).toBe(0);
  });

  it('refuses a path that is not absolute and normalised, or that a first line cannot carry', async () => {
    expectUsageError(await installWith(BUNDLE, '--node', 'node'), /must be an absolute, normalised path/);
    expectUsageError(await installWith(BUNDLE, '--node', '/usr/bin/../bin/node'), /must be an absolute, normalised path/);
    expectUsageError(await installWith(BUNDLE, '--node', '/opt/my node/bin/node'), /space or control character/);
    expectUsageError(await installWith(BUNDLE, '--node', '/opt/node\n/bin/node'), /space or control character/);
  });

  it('refuses what is not an executable file', async () => {
    expectUsageError(await installWith(BUNDLE, '--node', join(s.root, 'no-such-node')), /is not an executable file \(ENOENT\)/);
    expectUsageError(await installWith(BUNDLE, '--node', s.root), /is not a file/);
    const plain = join(s.root, 'plain');
    writeFileSync(plain, '', { mode: 0o644 });
    chmodSync(plain, 0o644);
    // Root passes access(X_OK) for a file with any execute bit, and none is set here.
    expectUsageError(await installWith(BUNDLE, '--node', plain), /is not an executable file \(EACCES\)/);
  });

  it('runs it, and refuses what is not Node.js, or too old a one, naming what it answered', async () => {
    expectUsageError(await installWith(BUNDLE, '--node', fakeNode('silent', 'exit 0')), /is not Node\.js: --version answered ""/);
    expectUsageError(await installWith(BUNDLE, '--node', fakeNode('python', 'echo "Python 3.11.2"')), /is not Node\.js: --version answered "Python 3\.11\.2"/);
    expectUsageError(await installWith(BUNDLE, '--node', fakeNode('old', 'echo v18.19.0')), /is Node\.js v18\.19\.0; twinvol needs 20\.17 or later/);
    expectUsageError(await installWith(BUNDLE, '--node', fakeNode('broken', 'echo "cannot load libnode" >&2; exit 127')), /did not answer --version: .*exit code 127: cannot load libnode/);
  });

  it('refuses a path that makes the first line longer than the kernel reads, as a usage error', async () => {
    // A real node, 240 bytes of directories deep: with "#!" and " --no-warnings" over 255 bytes.
    const deep = join(s.root, ...Array.from({ length: 24 }, () => 'd'.repeat(9)));
    mkdirSync(deep, { recursive: true });
    const node = join(deep, 'node');
    symlinkSync(process.execPath, node);
    const r = await installWith(BUNDLE, '--node', node);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^twinvol: --node .* makes a first line of \d+ bytes; the kernel reads 255 \(see: twinvol --help\)\n$/);
    expect(existsSync(installed)).toBe(false);
  });

  it.skipIf(!existsSync(SEA))('is refused for a single executable, which carries its own Node.js', async () => {
    expectUsageError(await installWith(SEA, '--node', process.execPath), /--node is for the bundle: a single executable carries its own Node\.js/);
  });

  it("holds the same floor as package.json's engines", () => {
    expect(pkg.engines.node).toBe(`>=${MIN_NODE.join('.')}`);
  });
});
