import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/flex-runner.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

let s: Scratch;
beforeAll(() => {
  s = createScratch('node-a');
});
afterAll(() => s.cleanup());

const catalogEntries = () => (existsSync(join(s.dataRoot, 'volumes')) ? readdirSync(join(s.dataRoot, 'volumes')) : []);

describe('twinvol volume: a command line that does not parse', () => {
  it.each([
    [['create', 'v', '--size', '1Mi', '--access', 'many'], /Invalid values: Argument: access, Given: "many"/],
    [['create', 'v', '--size', '1Mi', '--backend', 'nfs'], /Argument: backend, Given: "nfs"/],
    [['create', 'v', '--size', '1Mi', '--data-root', '/elsewhere'], /Unknown arguments: data-root/],
    [['create'], /Not enough non-option arguments/],
    [['remove', 'v'], /Unknown arguments: remove, v/],
  ])('%j: exit 2, one line naming what is wrong, nothing created', async (args, reason) => {
    const r = await runCli(s.env, args);
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(reason);
    expect(catalogEntries()).toEqual([]);
    expect(existsSync('/elsewhere')).toBe(false);
  });
});
