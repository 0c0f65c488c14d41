import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { brotliDecompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';

// Every kubelet call reads and scans the whole FlexVolume script, so the operator's tools (check,
// compare, migrate verify and plan) trail it as one compressed comment, read only when a tool runs
// (scripts/build.mjs toolsTrailer, flex/packed-modules.ts). Packed into the script as strings they
// made it 773 KB and `init` 1.36x bare `node -e 0` (1.19-1.25x after, on a quiet machine).
const ROOT = resolve(import.meta.dirname, '../..');
const BUNDLE = resolve(ROOT, 'dist/flex/twinvol');
const SEA = resolve(ROOT, 'dist/sea/twinvol');
const MARKER = '\n/*TWINVOL-TOOLS:';

describe('the FlexVolume executable keeps the operator tools out of its script', () => {
  const text = readFileSync(BUNDLE, 'latin1');
  const at = text.lastIndexOf(MARKER);

  it('ends with the tools as one comment, and what kubelet runs before it stays small', () => {
    expect(at).toBeGreaterThan(0);
    expect(text.indexOf('*/', at)).toBe(text.length - 3);
    expect(at).toBeLessThan(300 * 1024);
    const tools: unknown = JSON.parse(brotliDecompressSync(Buffer.from(text.slice(at + MARKER.length, -3), 'base64')).toString('utf8'));
    expect(Object.keys(tools as object).sort()).toEqual(['check', 'compare', 'migrate', 'verify']);
  });

  it.each([
    ['the bundle', BUNDLE],
    ['the single executable (its tools are an asset)', SEA],
  ])('%s runs a tool: migrate plan under env -i', (_what, bin) => {
    const out = execFileSync('env', ['-i', bin, 'migrate', 'plan', resolve(ROOT, 'test/migrate/fixtures/cluster.yaml')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    expect(out).toMatch(/^---\napiVersion: v1\nkind: PersistentVolume\n/);
  });
});
