import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FLEX_BIN, runAdmin } from '../helpers/flex-runner.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// Issue 11, item 7: a long operation shows its progress on a terminal, and only there
// (flex/progress.ts). `script` gives the executable a pseudo-terminal as kubelet and scripts never do.
let s: Scratch;
beforeAll(() => {
  s = createScratch('node-a');
});
afterAll(() => s.cleanup());

const quote = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;

it('volume create on a terminal says each step (image, mkfs) and erases the line; the volume is made', () => {
  const env = Object.entries({ PATH: '/usr/bin:/bin', ...s.env }).map(([k, v]) => `${k}=${quote(v)}`).join(' ');
  const out = execFileSync('script', ['-qec', `env -i ${env} ${quote(FLEX_BIN)} volume create big --size 2Gi`, '/dev/null'], { encoding: 'utf8' });
  expect(out).toMatch(/making a 2Gi image \.\.\. \d+\.\ds/);
  expect(out).toMatch(/formatting ext4 on 2Gi \.\.\. \d+\.\ds/);
  // The progress line is erased before the answer, which stays on its own line.
  expect(out).toMatch(/\r\x1b\[2Kcreated: big\t/);
  expect(existsSync(join(s.dataRoot, 'volumes/big/image.img'))).toBe(true);
});

it('volume create with stderr not a terminal prints the answer only', async () => {
  const r = await runAdmin(s.env, ['volume', 'create', 'quiet', '--size', '64Mi']);
  expect(r.exitCode).toBe(0);
  expect(r.stderr).toBe('');
  expect(r.stdout).toMatch(/^created: quiet\t/);
});
