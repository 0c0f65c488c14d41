import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../shared/config.js';
import { expectThrows } from './expect-error.js';

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync('/tmp/twinvol-test-config-');
  file = join(dir, 'config.json');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const withFile = (content: unknown, env: Record<string, string> = {}): Config => {
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return loadConfig({ TWINVOL_CONFIG: file, ...env });
};

describe('loadConfig', () => {
  it('uses the built-in defaults under an empty config file', () => {
    expect(withFile({})).toEqual({
      dataRoot: '/var/lib/twinvol',
      dataRootScope: 'shared',
      dataRootOnNetwork: false,
      stateDir: '/run/twinvol',
      kubeletDir: '/var/lib/kubelet',
      nodeName: hostname(),
      flexAttach: true,
      defaultFsType: 'ext4',
      commandTimeoutMs: 120_000,
      dataCommandTimeoutMs: 21_600_000,
      staticSourceRoots: [],
    });
  });

  // Depends on the machine: only meaningful where no system-wide config exists.
  it.skipIf(existsSync('/etc/twinvol/config.json'))('falls back to /etc/twinvol/config.json and tolerates its absence', () => {
    const cfg = loadConfig({}, { nodeName: 'n1' });
    expect(cfg.nodeName).toBe('n1');
    expect(cfg.dataRoot).toBe('/var/lib/twinvol');
  });

  it('takes values from the config file', () => {
    const cfg = withFile({
      dataRoot: '/srv/twinvol/',
      dataRootScope: 'node',
      dataRootOnNetwork: true,
      stateDir: '/run/tv',
      kubeletDir: '/k',
      nodeName: 'worker-1',
      flexAttach: false,
      defaultFsType: 'xfs',
      commandTimeoutMs: 5000,
      dataCommandTimeoutMs: 7_200_000,
      staticSourceRoots: ['/srv/shares/'],
    });
    expect(cfg).toEqual({
      dataRoot: '/srv/twinvol',
      dataRootScope: 'node',
      dataRootOnNetwork: true,
      stateDir: '/run/tv',
      kubeletDir: '/k',
      nodeName: 'worker-1',
      flexAttach: false,
      defaultFsType: 'xfs',
      commandTimeoutMs: 5000,
      dataCommandTimeoutMs: 7_200_000,
      staticSourceRoots: ['/srv/shares'],
    });
  });

  it('lets environment overrides win over the file, and explicit overrides win over both', () => {
    const fileValues = { dataRoot: '/file/data', stateDir: '/file/state', kubeletDir: '/file/kubelet', nodeName: 'file-node' };
    const env = { TWINVOL_DATA_ROOT: '/env/data', TWINVOL_STATE_DIR: '/env/state', TWINVOL_KUBELET_DIR: '/env/kubelet', TWINVOL_NODE_NAME: 'env-node' };
    expect(withFile(fileValues, env)).toMatchObject({ dataRoot: '/env/data', stateDir: '/env/state', kubeletDir: '/env/kubelet', nodeName: 'env-node' });
    // Empty environment values do not override.
    expect(withFile(fileValues, { TWINVOL_DATA_ROOT: '' }).dataRoot).toBe('/file/data');
    writeFileSync(file, JSON.stringify(fileValues));
    expect(loadConfig({ TWINVOL_CONFIG: file, ...env }, { dataRoot: '/explicit' }).dataRoot).toBe('/explicit');
  });

  it('refuses a missing explicit config file', () => {
    expectThrows(() => loadConfig({ TWINVOL_CONFIG: join(dir, 'nope.json') }), 'InvalidArgument', `cannot read config file ${join(dir, 'nope.json')}: ENOENT`);
  });

  it('refuses a config path that is a directory', () => {
    expectThrows(() => loadConfig({ TWINVOL_CONFIG: dir }), 'InvalidArgument', 'EISDIR');
  });

  it.each([
    ['{ not json', 'is not valid JSON'],
    ['', 'is not valid JSON'],
    ['[]', 'must hold a JSON object'],
    ['"x"', 'must hold a JSON object'],
    ['null', 'must hold a JSON object'],
    ['{"dataroot": "/x"}', 'unknown setting "dataroot"'],
    ['{"secret": "x"}', 'unknown setting "secret"'],
  ])('refuses the file %j', (content, message) => {
    const err = expectThrows(() => withFile(content), 'InvalidArgument', message);
    if (!message.startsWith('unknown')) expect(err.message).toContain(file);
  });

  it.each([
    [{ dataRoot: 'relative/data' }, 'setting dataRoot must be an absolute path'],
    [{ stateDir: './state' }, 'setting stateDir must be an absolute path'],
    [{ kubeletDir: '/var/lib/kubelet/../../etc' }, 'setting kubeletDir must be an absolute path'],
    [{ dataRoot: '/a/..' }, 'setting dataRoot must be an absolute path'],
    [{ dataRoot: '/' }, 'setting dataRoot must not be /'],
    [{ dataRoot: 42 }, 'setting dataRoot must be an absolute path'],
    [{ nodeName: 'bad/name' }, 'setting nodeName'],
    [{ nodeName: '' }, 'setting nodeName is required'],
    [{ flexAttach: 'yes' }, 'setting flexAttach must be true or false'],
    [{ dataRootScope: 'cluster' }, 'setting dataRootScope must be one of shared, node'],
    [{ dataRootOnNetwork: 'yes' }, 'setting dataRootOnNetwork must be true or false'],
    [{ commandTimeoutMs: 999 }, 'commandTimeoutMs must be a whole number of milliseconds from 1000 to 2147483647'],
    // Past what a Node timer holds, every deadline would pass after 1 ms.
    [{ commandTimeoutMs: 3_000_000_000 }, 'commandTimeoutMs must be a whole number of milliseconds from 1000 to 2147483647'],
    [{ commandTimeoutMs: 1500.5 }, 'commandTimeoutMs'],
    [{ commandTimeoutMs: '5000' }, 'commandTimeoutMs'],
    [{ dataCommandTimeoutMs: 0 }, 'setting dataCommandTimeoutMs must be a whole number of milliseconds from 1000 to 2147483647'],
    [{ defaultFsType: 'btrfs' }, 'fsType "btrfs" is not supported'],
    [{ staticSourceRoots: '/srv' }, 'setting staticSourceRoots must be a list of at most 64 absolute paths'],
    [{ staticSourceRoots: ['/'] }, 'setting staticSourceRoots[0] must not be /'],
    [{ staticSourceRoots: ['/srv', 'rel'] }, 'setting staticSourceRoots[1] must be an absolute path'],
  ])('refuses the setting %j', (content, message) => {
    expectThrows(() => withFile(content), 'InvalidArgument', message);
  });

  it('refuses bad environment overrides too', () => {
    expectThrows(() => withFile({}, { TWINVOL_KUBELET_DIR: 'kubelet' }), 'InvalidArgument', 'setting kubeletDir must be an absolute path');
    expectThrows(() => withFile({}, { TWINVOL_DATA_ROOT: '/x/../y' }), 'InvalidArgument', 'setting dataRoot must be an absolute path');
    expectThrows(() => withFile({}, { TWINVOL_NODE_NAME: '..' }), 'InvalidArgument', 'setting nodeName');
  });

  // Once "is not valid JSON" alone, and a refused setting named no file: an operator had to guess.
  it.each([
    ['{\n  "dataRoot": "/x",\n}', 'at line 3, column 1 (Expected double-quoted property name)'],
    ['{\n  "dataRoot": "/x"\n  "stateDir": "/y"\n}', 'at line 3, column 3 (Expected \',\' or \'}\' after property value)'],
    // No position in V8's message for these: found from the shortest prefix that fails.
    ['{\n  "flexAttach": flase\n}', 'at line 2, column 18 (Unexpected token \'l\')'],
    ['dataRoot: /x', 'at line 1, column 1 (Unexpected token \'d\')'],
    ['{"flexAttach": tr', 'at line 1, column 18 (Unexpected end of JSON input)'],
    ['{} {}', 'at line 1, column 4 (Unexpected non-whitespace character after JSON)'],
    ['{"dataRoot": "/x\ty"}', 'at line 1, column 17 (Bad control character in string literal)'],
  ])('says where in the file %j stops being JSON, and why', (content, where) => {
    expectThrows(() => withFile(content), 'InvalidArgument', `config file ${file} is not valid JSON ${where}`);
  });

  it('names where a refused setting was set: the file, or the variable that overrode it', () => {
    expect(() => withFile({ flexAttach: 'no' })).toThrow(`config file ${file}: setting flexAttach must be true or false`);
    expect(() => withFile({ defaultFsType: 'btrfs' })).toThrow(`config file ${file}: setting defaultFsType: fsType "btrfs" is not supported`);
    expect(() => withFile({ dataRoot: '/ok' }, { TWINVOL_DATA_ROOT: 'rel' })).toThrow(/^TWINVOL_DATA_ROOT: setting dataRoot must be an absolute path$/);
    // A caller's own override (twinvol-csi's flags) is the caller's to name.
    expect(() => loadConfig({ TWINVOL_CONFIG: file }, { dataRoot: 'rel' })).toThrow(/^setting dataRoot must be an absolute path$/);
  });
});
