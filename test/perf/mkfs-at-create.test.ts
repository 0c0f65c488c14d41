import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { FLEX_BIN, runAdmin } from '../helpers/flex-runner.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';
import { wrappedTool } from '../helpers/tool-wrapper.js';
import { killStalled, untilStalled } from '../helpers/stalling-tool.js';

/**
 * A block volume's filesystem is made when it is created, on the image in the create's work directory
 * (shared/backends/block.ts populate). A create killed in the middle of mkfs must leave nothing that a
 * later create or delete of the same volume trips on: the work is swept and made again.
 */
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a', '/tmp/twinvol-mkfs-crash-');
});
afterEach(() => s.cleanup());

it('a create killed mid-mkfs leaves only swept work: the same create then succeeds with a whole filesystem', async () => {
  const marker = join(s.root, 'mkfs-stalled');
  // mkfs.ext4 ... -- <image>: scribble over the image's first blocks, as a half-run mkfs leaves it,
  // and stop there until killed. The image is the last argument (`for image; do :; done` keeps it):
  // a fixed position broke when an option was added and wrote the scribble into the cwd instead.
  const stall = wrappedTool(
    s.root,
    'mkfs.ext4',
    `for image; do :; done; case "$image" in ${s.root}/*) ;; *) echo "not an image under the scratch: $image" >&2; exit 9;; esac; echo $$ > '${marker}'; dd if=/dev/urandom of="$image" bs=4096 count=64 conv=notrunc 2>/dev/null; exec sleep 60`,
  );
  const child = spawn(FLEX_BIN, ['volume', 'create', 'v-crash', '--size', '64Mi'], { stdio: 'ignore', env: { ...s.env, PATH: `${stall.dir}:/usr/bin:/bin` } });
  const exited = new Promise((r) => child.on('exit', r));
  try {
    await untilStalled({ dir: stall.dir, marker }, 'volume create');
    child.kill('SIGKILL');
    await exited;
  } finally {
    killStalled({ dir: stall.dir, marker });
  }
  expect(existsSync(join(s.dataRoot, 'volumes/v-crash'))).toBe(false);
  expect(readdirSync(join(s.dataRoot, '.work')).filter((n) => n.includes('v-crash'))).toHaveLength(1);

  // The volume does not exist: a delete is done at once, and the create that follows makes it whole.
  expect(await runAdmin(s.env, ['volume', 'delete', 'v-crash'])).toMatchObject({ exitCode: 0 });
  const created = await runAdmin(s.env, ['volume', 'create', 'v-crash', '--size', '64Mi']);
  expect(created.exitCode, created.stderr).toBe(0);
  expect(readdirSync(join(s.dataRoot, '.work')).filter((n) => n.includes('v-crash'))).toEqual([]);
  const record = JSON.parse(readFileSync(join(s.dataRoot, 'volumes/v-crash/volume.json'), 'utf8')) as { madeFilesystem?: string };
  expect(record.madeFilesystem).toBe('ext4');
  const fsck = await new Promise<number | null>((done) => spawn('e2fsck', ['-n', '-f', join(s.dataRoot, 'volumes/v-crash/image.img')], { stdio: 'ignore' }).on('exit', done));
  expect(fsck).toBe(0);
});
