import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { MIN_NODE } from '../../flex/node-shebang.js';
import { type Collected, collect } from '../helpers/collect.js';
import { FLEX_BUILDS } from '../helpers/flex-runner.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// `twinvol install flex --node <path>` (flex/node-shebang.ts): the installed bundle's first line
// names that Node, so the kernel execs it directly instead of env, which then looks node up on
// kubelet's PATH. The bundle alone: a single executable has no first line to change.
const BUNDLE = FLEX_BUILDS.bundle;
const SEA = FLEX_BUILDS.sea;

let s: Scratch;
let pluginDir: string;
let installed: string;
beforeEach(() => {
  s = createScratch('node-a');
  pluginDir = join(s.root, 'plugins');
  installed = join(pluginDir, 'acme~twinvol/twinvol');
});
afterEach(() => s.cleanup());

const install = (bin: string, ...extra: string[]) => collect(bin, ['install', 'flex', '--plugin-dir', pluginDir, '--vendor', 'acme', ...extra], { env: { PATH: '/usr/bin:/bin', ...s.env } });
/** kubelet's call, with a PATH on which there is no node at all. */
const initWithoutNodeOnPath = () => collect(installed, ['init'], { env: { PATH: join(s.root, 'empty-bin'), TWINVOL_CONFIG: s.env.TWINVOL_CONFIG! } });
const firstLine = (path: string) => readFileSync(path, 'latin1').split('\n', 1)[0];

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
  it('names that node in the first line, keeps the rest byte for byte, and the driver runs with no node on PATH', async () => {
    const r = await install(BUNDLE, '--node', process.execPath);
    expect(r.code).toBe(0);
    const bundle = readFileSync(BUNDLE);
    const copy = readFileSync(installed);
    expect(firstLine(BUNDLE)).toBe('#!/usr/bin/env -S node --no-warnings');
    expect(firstLine(installed)).toBe(`#!${process.execPath} --no-warnings`);
    const rest = (b: Buffer) => b.subarray(b.indexOf(0x0a) + 1);
    expect(rest(copy).equals(rest(bundle))).toBe(true);
    expect(statSync(installed).mode & 0o7777).toBe(0o755);
    expect(JSON.parse((await initWithoutNodeOnPath()).stdout)).toEqual({ status: 'Success', capabilities: { fsGroup: false } });
  });

  it('without it, the same call needs node on PATH: what --node saves kubelet from', async () => {
    expect((await install(BUNDLE)).code).toBe(0);
    const r = await initWithoutNodeOnPath();
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/env: .*node.*: No such file or directory/);
  });

  it('is idempotent, and an install without it puts the env line back', async () => {
    expect((await install(BUNDLE, '--node', process.execPath)).code).toBe(0);
    const ino = statSync(installed).ino;
    const again = await install(BUNDLE, '--node', process.execPath);
    expect(again.stdout).toContain(`unchanged: ${installed} (kubelet driver acme/twinvol)`);
    expect(statSync(installed).ino).toBe(ino);
    expect((await install(BUNDLE)).stdout).toContain(`installed: ${installed} (kubelet driver acme/twinvol)`);
    expect(readFileSync(installed).equals(readFileSync(BUNDLE))).toBe(true);
  });

  it('keeps a link as given, not where it points: a package upgrade moves the target, not the link', async () => {
    const link = join(s.root, 'bin/node');
    mkdirSync(join(s.root, 'bin'));
    symlinkSync(process.execPath, link);
    expect((await install(BUNDLE, '--node', link)).code).toBe(0);
    expect(firstLine(installed)).toBe(`#!${link} --no-warnings`);
    expect((await initWithoutNodeOnPath()).code).toBe(0);
  });

  it('refuses a path that is not absolute and normalised, or that a first line cannot carry', async () => {
    expectUsageError(await install(BUNDLE, '--node', 'node'), /must be an absolute, normalised path/);
    expectUsageError(await install(BUNDLE, '--node', '/usr/bin/../bin/node'), /must be an absolute, normalised path/);
    expectUsageError(await install(BUNDLE, '--node', '/opt/my node/bin/node'), /space or control character/);
    expectUsageError(await install(BUNDLE, '--node', '/opt/node\n/bin/node'), /space or control character/);
  });

  it('refuses what is not an executable file', async () => {
    expectUsageError(await install(BUNDLE, '--node', join(s.root, 'no-such-node')), /is not an executable file \(ENOENT\)/);
    expectUsageError(await install(BUNDLE, '--node', s.root), /is not a file/);
    const plain = join(s.root, 'plain');
    writeFileSync(plain, '', { mode: 0o644 });
    chmodSync(plain, 0o644);
    // Root passes access(X_OK) for a file with any execute bit, and none is set here.
    expectUsageError(await install(BUNDLE, '--node', plain), /is not an executable file \(EACCES\)/);
  });

  it('runs it, and refuses what is not Node.js, or too old a one, naming what it answered', async () => {
    expectUsageError(await install(BUNDLE, '--node', fakeNode('silent', 'exit 0')), /is not Node\.js: --version answered ""/);
    expectUsageError(await install(BUNDLE, '--node', fakeNode('python', 'echo "Python 3.11.2"')), /is not Node\.js: --version answered "Python 3\.11\.2"/);
    expectUsageError(await install(BUNDLE, '--node', fakeNode('old', 'echo v18.19.0')), /is Node\.js v18\.19\.0; twinvol needs 20\.17 or later/);
    expectUsageError(await install(BUNDLE, '--node', fakeNode('broken', 'echo "cannot load libnode" >&2; exit 127')), /did not answer --version: .*exit code 127: cannot load libnode/);
  });

  it('refuses a path that makes the first line longer than the kernel reads, as a usage error', async () => {
    // A real node, 240 bytes of directories deep: with "#!" and " --no-warnings" over 255 bytes.
    const deep = join(s.root, ...Array.from({ length: 24 }, () => 'd'.repeat(9)));
    mkdirSync(deep, { recursive: true });
    const node = join(deep, 'node');
    symlinkSync(process.execPath, node);
    const r = await install(BUNDLE, '--node', node);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^twinvol: --node .* makes a first line of \d+ bytes; the kernel reads 255 \(see: twinvol --help\)\n$/);
    expect(existsSync(installed)).toBe(false);
  });

  it.skipIf(!existsSync(SEA))('is refused for a single executable, which carries its own Node.js', async () => {
    expectUsageError(await install(SEA, '--node', process.execPath), /--node is for the bundle: a single executable carries its own Node\.js/);
  });

  it("holds the same floor as package.json's engines", () => {
    expect(pkg.engines.node).toBe(`>=${MIN_NODE.join('.')}`);
  });
});
