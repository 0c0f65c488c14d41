import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Core } from '../../shared/core/core.js';
import { listNodes, registerNode } from '../../shared/core/nodes.js';
import { createVolume, deleteVolume, listVolumes } from '../../shared/core/volumes.js';
import { asTwinvolError } from '../../shared/errors.js';
import { runCli } from '../helpers/flex-runner.js';
import { nid, vid } from '../helpers/ids.js';
import type { Scratch } from '../helpers/scratch.js';
import { useScratchCore } from './core-scratch.js';

// A full filesystem under the data root: every error says what failed, on which file, and what to do
// (shared/errors.ts systemError), the records written before stay whole, and freeing space is enough
// to go on. The tmpfs is unmounted by the scratch's cleanup, whatever the outcome.
let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

function smallDataRoot(options: string): void {
  mkdirSync(s.dataRoot, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'twinvol-test-full', s.dataRoot]);
}

/** Writes until the filesystem refuses: not a byte left. */
function fillUp(): void {
  try {
    writeFileSync(join(s.dataRoot, 'filler'), Buffer.alloc(512 * 1024));
  } catch {
    // ENOSPC: full, as wanted
  }
}

const dirVolume = (id: string) => ({ id, backend: 'dir' as const, capacityBytes: 2 ** 20, createdBy: 'cli' as const });

describe('exhaustion', () => {
  it('out of inodes: ResourceExhausted naming the file and what to do, earlier volumes intact, fine again once freed', async () => {
    smallDataRoot('size=4m,nr_inodes=48');
    const made: string[] = [];
    let failure: unknown;
    for (let i = 0; i < 40 && failure === undefined; i++) {
      try {
        await createVolume(core, dirVolume(`v${i}`));
        made.push(`v${i}`);
      } catch (err) {
        failure = err;
      }
    }
    expect(made.length).toBeGreaterThan(2);
    const e = asTwinvolError(failure);
    expect(e.code).toBe('ResourceExhausted');
    expect(e.message).toMatch(new RegExp(`^cannot \\S+( \\S+)? ${s.dataRoot}/\\S+: no space or no free inodes left on its filesystem \\(ENOSPC\\); free space \\(df\\) or inodes \\(df -i\\) there, then retry$`));
    expect((await listVolumes(core)).volumes.map((v) => v.id).sort()).toEqual([...made].sort());

    for (const id of made.slice(0, 2)) await deleteVolume(core, vid(id));
    await createVolume(core, dirVolume('after'));
  });

  it('out of space for a record: the record is named, the previous one stays whole', async () => {
    smallDataRoot('size=256k');
    await registerNode(core, nid('node-b'), { zone: 'a' }, 'csi');
    writeFileSync(join(s.dataRoot, 'filler'), Buffer.alloc(252 * 1024));
    const e = asTwinvolError(await registerNode(core, nid('node-b'), { zone: 'b'.repeat(3000) }, 'csi').catch((err: unknown) => err));
    expect(e.message).toMatch(new RegExp(`^cannot write ${s.dataRoot}/nodes/node-b.json\\S*: no space or no free inodes left on its filesystem \\(ENOSPC\\)`));
    expect((await listNodes(core)).find((n) => n.nodeId === 'node-b')?.topology).toEqual({ zone: 'a' });
  });

  it('the admin CLI says it in one line', async () => {
    smallDataRoot('size=256k');
    fillUp();
    const r = await runCli(s.env, ['create', 'big', '--backend', 'block', '--size', '64Mi']);
    expect(r.exitCode).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^twinvol: cannot .*\(ENOSPC\); free space/);
  });
});
