import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

// The layering rule of docs/architecture.md, checked on the sources: the front ends reach the core only
// through shared/index.ts, and the core knows nothing of the front ends.
const root = join(import.meta.dirname, '..', '..');

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .filter((p) => !p.split('/').includes('generated'));
}

/** Every module specifier a file imports or re-exports, static or dynamic. */
function specifiers(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((m) => m[1] ?? '');
}

describe('the core has one public entry', () => {
  it('flex/, csi/ and scripts/ import the core only through shared/index.ts', () => {
    const files = [...sources('flex'), ...sources('csi'), ...sources('scripts')];
    expect(files.length).toBeGreaterThan(20);
    const reaching = files.flatMap((f) => specifiers(f).filter((s) => s.includes('shared/') && !s.endsWith('shared/index.js')).map((s) => `${f}: ${s}`));
    expect(reaching).toEqual([]);
  });

  it('the core imports nothing from the front ends', () => {
    const files = sources('shared');
    expect(files.length).toBeGreaterThan(20);
    const reaching = files.flatMap((f) => specifiers(f).filter((s) => /(^|\/)(flex|csi)\//.test(s)).map((s) => `${f}: ${s}`));
    expect(reaching).toEqual([]);
  });

  it('the front ends never branch on a backend by name: what a backend knows, it answers (shared/core/backend-traits.ts)', () => {
    const files = [...sources('flex'), ...sources('csi')];
    const naming = files.flatMap((f) =>
      readFileSync(join(root, f), 'utf8')
        .split('\n')
        .map((line, i) => ({ line, at: `${f}:${i + 1}` }))
        .filter(({ line }) => /backend\s*[!=]==?\s*'|'(dir|block|static)'\s*[!=]==?\s*\w*backend/i.test(line))
        .map(({ at }) => at),
    );
    expect(naming).toEqual([]);
  });
});
