import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { brotliDecompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';

// Node reads and scans every byte of the FlexVolume script on every kubelet call, so the script is
// only the start-up path and everything else trails it as one comment of compressed modules with an
// index on the last line, each read only when a call needs it (scripts/build.mjs packedTrailer,
// flex/packed-modules.ts). As strings in the script the dispatcher and yargs alone kept `init` near
// 1.2x bare `node -e 0`; the figures are in the README's benchmark section.
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

  it('indexes every module where it is, each one inflating to code that names its exports', () => {
    const index = JSON.parse(text.slice(indexAt + 3 + MARKER.length)) as Record<string, [number, number, boolean]>;
    expect(Object.keys(index).sort()).toEqual(['check', 'cli', 'compare', 'dispatch', 'migrate', 'verify']);
    const exported = { dispatch: 'dispatch', cli: 'runCli', check: 'runCheck', compare: 'runCompareCommand', verify: 'runVerify', migrate: 'runMigratePlan' };
    for (const [name, [at, length, group]] of Object.entries(index)) {
      expect(at).toBeGreaterThan(start);
      expect(at + length).toBeLessThan(indexAt);
      const inflated = brotliDecompressSync(Buffer.from(text.slice(at, at + length), 'base64')).toString('utf8');
      const source = group ? (JSON.parse(inflated) as Record<string, string>)[name] : inflated;
      expect(source).toContain(exported[name as keyof typeof exported]);
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
