import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { brotliDecompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';

// Node reads and scans every byte of the FlexVolume script on every kubelet call, so the script is
// only the start-up path, then the dispatcher as one comment of compressed code with an index on the
// last line, and the modules kubelet never runs sit in a file beside it (scripts/build.mjs
// packedTrailer, flex/packed-modules.ts). As strings in the script the dispatcher and yargs alone
// kept `init` near 1.2x bare `node -e 0`; the figures are in the README's benchmark section.
const ROOT = resolve(import.meta.dirname, '../..');
const BUNDLE = resolve(ROOT, 'dist/flex/twinvol');
const SEA = resolve(ROOT, 'dist/sea/twinvol');
const MARKER = 'TWINVOL-PACKED:';

describe('the FlexVolume executable keeps everything but its start-up path out of its script', () => {
  const text = readFileSync(BUNDLE, 'latin1');
  const start = text.lastIndexOf(`\n/*${MARKER}\n`);
  const indexAt = text.lastIndexOf(`\n//${MARKER}`);

  it('is a small script, then one comment of packed modules, then the index as its last line', () => {
    expect(start).toBeGreaterThan(0);
    expect(start).toBeLessThan(16 * 1024);
    expect(text.indexOf('*/', start)).toBe(indexAt - 2);
    expect(text.endsWith('\n')).toBe(true);
    expect(text.indexOf('\n', indexAt + 1)).toBe(text.length - 1);
  });

  it('indexes every module where it is: the dispatcher in the script, the rest in the file beside it', () => {
    const index = JSON.parse(text.slice(indexAt + 3 + MARKER.length)) as Record<string, [number, number, boolean, string?]>;
    expect(Object.keys(index).sort()).toEqual(['check', 'cli', 'compare', 'dispatch', 'migrate', 'verify']);
    const beside = readFileSync(`${BUNDLE}.modules`, 'latin1');
    const exported = { dispatch: 'dispatch', cli: 'runCli', check: 'runCheck', compare: 'runCompareCommand', verify: 'runVerify', migrate: 'runMigratePlan' };
    for (const [name, [at, length, group, key]] of Object.entries(index)) {
      expect(key === undefined, `${name} is in the script only if kubelet's calls run it`).toBe(name === 'dispatch');
      let blob: string;
      if (key === undefined) {
        expect(at).toBeGreaterThan(start);
        expect(at + length).toBeLessThan(indexAt);
        blob = text.slice(at, at + length);
      } else {
        expect(beside.startsWith(`${MARKER}${key}\n`)).toBe(true);
        expect(at).toBeGreaterThanOrEqual(`${MARKER}${key}\n`.length);
        expect(at + length).toBeLessThan(beside.length);
        blob = beside.slice(at, at + length);
      }
      const inflated = brotliDecompressSync(Buffer.from(blob, 'base64')).toString('utf8');
      const source = group ? (JSON.parse(inflated) as Record<string, string>)[name] : inflated;
      expect(source).toContain(exported[name as keyof typeof exported]);
    }
    // What every verb reads: the start-up path and the dispatcher, not the operator's 400-odd KB.
    expect(text.length).toBeLessThan(64 * 1024);
  });

  it('without the file beside it, kubelet is answered and a person is told in one line what is missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'twinvol-startup-'));
    try {
      const alone = join(dir, 'twinvol');
      copyFileSync(BUNDLE, alone);
      const env = { PATH: '/usr/bin:/bin', TWINVOL_STATE_DIR: `${dir}/state`, TWINVOL_DATA_ROOT: `${dir}/data` };
      const run = (...args: string[]) => spawnSync(alone, args, { encoding: 'utf8', env });
      expect(JSON.parse(run('getvolumename', '{"volumeId":"nope"}').stdout)).toMatchObject({ status: 'Failure', message: expect.stringContaining('volume nope does not exist') });
      const missing = run('volume', 'list');
      expect({ status: missing.status, stdout: missing.stdout }).toEqual({ status: 1, stdout: '' });
      expect(missing.stderr).toMatch(new RegExp(`^twinvol: ${alone}\\.modules cannot be read \\(ENOENT\\): [^\\n]*twinvol install flex[^\\n]*\\n$`));
      // Another build's file (its first line names another key): refused by name, never run.
      writeFileSync(`${alone}.modules`, `${MARKER}0123456789abcdef\n`);
      const other = run('--version');
      expect({ status: other.status, stdout: other.stdout, stderr: other.stderr }).toEqual({ status: 1, stdout: '', stderr: `twinvol: ${alone}.modules is not the one ${alone} was built with: copy the two files of one build together\n` });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a caller that closed its end before the reply gets exit 1 and nothing on stderr', async () => {
    const child = spawn(BUNDLE, ['init'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((done) => child.on('close', done));
    expect({ code, stderr }).toEqual({ code: 1, stderr: '' });
  });

  it.each([
    ['the bundle', BUNDLE],
    ['the single executable (its packed modules are assets)', SEA],
  ])('%s loads a verb, the CLI and a tool with nothing but its own settings', (_what, bin) => {
    // Only the state dir and data root, in a temporary directory: a verb writes its log and compile
    // cache under the state dir, which must not be the host's /run/twinvol.
    const dir = mkdtempSync(join(tmpdir(), 'twinvol-startup-'));
    try {
      const env = ['-i', `TWINVOL_STATE_DIR=${dir}/state`, `TWINVOL_DATA_ROOT=${dir}/data`];
      const run = (...args: string[]) => execFileSync('env', [...env, bin, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      // A verb goes through the packed dispatcher: its answer here (no such volume) is its own words.
      const verb = spawnSync('env', [...env, bin, 'getvolumename', '{"volumeId":"nope"}'], { encoding: 'utf8' });
      expect(JSON.parse(verb.stdout)).toMatchObject({ status: 'Failure', message: expect.stringContaining('volume nope does not exist') });
      expect(verb.stderr).toBe('');
      expect(run('--version')).toMatch(/^twinvol \d+\.\d+\.\d+/);
      expect(run('migrate', 'plan', resolve(ROOT, 'test/migrate/fixtures/cluster.yaml'))).toMatch(/^---\napiVersion: v1\nkind: PersistentVolume\n/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
