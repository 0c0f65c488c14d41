import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runAdmin, runFlex } from '../helpers/flex-runner.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// `twinvol install flex` without --config keeps the config file already on disk, and the driver it
// installs reads that file on every kubelet call (flex/install.ts existingConfigError). One that
// does not load made an install that answered every call with Failure: it is refused instead,
// naming the file and where it is wrong, and the file is left as the operator wrote it.
let s: Scratch;
let pluginDir: string;
let installed: string;
let configPath: string;
beforeEach(() => {
  s = createScratch('node-a');
  pluginDir = join(s.root, 'plugins');
  installed = join(pluginDir, 'acme~twinvol/twinvol');
  configPath = s.env.TWINVOL_CONFIG ?? '';
});
afterEach(() => s.cleanup());

const install = (...extra: string[]) => runAdmin(s.env, ['install', 'flex', '--plugin-dir', pluginDir, '--vendor', 'acme', ...extra]);

describe('twinvol install flex: the config file already on disk', () => {
  it.each([
    ['not JSON (a trailing comma)', '{\n  "flexAttach": true,\n}\n', ' is not valid JSON at line 3, column 1 (Expected double-quoted property name)'],
    ['YAML', 'flexAttach: false\n', " is not valid JSON at line 1, column 2 (Unexpected token 'l')"],
    ['an unknown setting', '{"flexAtach": false}\n', ': unknown setting "flexAtach"'],
    ['a bad value', '{"dataRoot": "relative"}\n', ': setting dataRoot must be an absolute path'],
    ['a bad node name', '{"nodeName": "Node A"}\n', ': setting nodeName'],
  ])('%s: exit 2, one line naming the file and what is wrong; nothing installed, the file untouched', async (_what, text, wrong) => {
    writeFileSync(configPath, text);
    const before = statSync(configPath);
    const r = await install();
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^twinvol: [^\n]+\n$/);
    expect(r.stderr).toContain(`twinvol: config file ${configPath}${wrong}`);
    expect(r.stderr).toContain('nothing installed, as the driver would answer every kubelet call with Failure (mend the file, or give --config)');
    expect(existsSync(pluginDir)).toBe(false);
    expect(readFileSync(configPath, 'utf8')).toBe(text);
    expect(statSync(configPath).mtimeMs).toBe(before.mtimeMs);
  });

  it('a config path that cannot be read (a directory): refused the same way', async () => {
    rmSync(configPath);
    mkdirSync(configPath);
    const r = await install();
    expect(r).toMatchObject({ exitCode: 2, stdout: '' });
    expect(r.stderr).toMatch(new RegExp(`^twinvol: cannot read config file ${configPath}: EISDIR: nothing installed[^\\n]*\\n$`));
    expect(existsSync(pluginDir)).toBe(false);
  });

  it('a valid config is kept as it is, and the installed driver answers from it', async () => {
    const text = '{"flexAttach": false}\n';
    writeFileSync(configPath, text);
    const before = statSync(configPath);
    const r = await install();
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).not.toContain(configPath);
    expect(readFileSync(configPath, 'utf8')).toBe(text);
    expect(statSync(configPath)).toMatchObject({ ino: before.ino, mtimeMs: before.mtimeMs });
    const init = await runFlex({ TWINVOL_CONFIG: configPath }, ['init'], installed);
    expect(init.reply).toEqual({ status: 'Success', capabilities: { attach: false, fsGroup: false } });
  });

  it('no config file at all: the defaults, installed, and none written', async () => {
    rmSync(configPath);
    const r = await install();
    expect(r.exitCode, r.stderr).toBe(0);
    expect(existsSync(configPath)).toBe(false);
    expect(existsSync(installed)).toBe(true);
  });

  it('--config replaces a broken one: the operator named the new config, and the line says it was written', async () => {
    writeFileSync(configPath, '{"flexAtach": false}\n');
    const r = await install('--config', '{"flexAttach": false}');
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`written: ${configPath}\n`);
    expect(readFileSync(configPath, 'utf8')).toBe('{"flexAttach": false}\n');
  });
});
