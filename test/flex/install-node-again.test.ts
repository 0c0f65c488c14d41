import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { collect } from '../helpers/collect.js';
import { FLEX_BUILDS } from '../helpers/flex-runner.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// `twinvol install flex` run from a driver that an install with --node placed (flex/node-shebang.ts):
// its first line names a Node, not env. Moving to another Node (a package that moved it) or going
// back to env is an install from the driver at hand; once, every --node from it was refused ("does
// not start with #!/usr/bin/env -S node"), exit 1, and an install without --node kept the old Node.
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const driverIn = (dir: string) => join(s.root, dir, 'acme~twinvol/twinvol');
const installFrom = (bin: string, dir: string, ...extra: string[]) =>
  collect(bin, ['install', 'flex', '--plugin-dir', join(s.root, dir), '--vendor', 'acme', ...extra], { env: { PATH: '/usr/bin:/bin', ...s.env } });
const firstLine = (path: string) => readFileSync(path, 'latin1').split('\n', 1)[0];
/** A CLI command (the modules beside the driver) and a verb that loads the dispatcher from the packed index (init alone does not). */
async function expectVerbsRun(bin: string): Promise<void> {
  const made = await collect(bin, ['volume', 'create', 'vol-1', '--backend', 'dir', '--size', '1Mi'], { env: { PATH: '/usr/bin:/bin', ...s.env } });
  expect(made.code, made.stderr).toBe(0);
  const named = await collect(bin, ['getvolumename', '{"volumeId":"vol-1","kubernetes.io/pvOrVolumeName":"pv-1"}'], { env: { ...s.env, PATH: join(s.root, 'empty-bin') } });
  expect(JSON.parse(named.stdout), named.stdout + named.stderr).toEqual({ status: 'Success', volumeName: 'vol-1' });
}

describe('twinvol install flex from a driver installed with --node', () => {
  it('names another node, and its verbs run', async () => {
    const first = await installFrom(FLEX_BUILDS.bundle, 'a', '--node', process.execPath);
    expect(first.code, first.stderr).toBe(0);
    // The same Node through a path of another length: the packed index moves again.
    const longer = join(s.root, 'a-much-longer-directory/bin/node');
    await collect('/bin/sh', ['-c', `mkdir -p "$(dirname "$1")" && ln -s "$2" "$1"`, 'sh', longer, process.execPath]);
    const again = await installFrom(driverIn('a'), 'b', '--node', longer);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    expect(firstLine(driverIn('b'))).toBe(`#!${longer} --no-warnings`);
    await expectVerbsRun(driverIn('b'));
  });

  it('without --node puts the env line back, byte for byte the bundle', async () => {
    expect((await installFrom(FLEX_BUILDS.bundle, 'a', '--node', process.execPath)).code).toBe(0);
    const again = await installFrom(driverIn('a'), 'b');
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(driverIn('b')).equals(readFileSync(FLEX_BUILDS.bundle))).toBe(true);
  });
});
