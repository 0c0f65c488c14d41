import { type ChildProcess, spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { FLEX_BIN, runAdmin } from '../helpers/flex-runner.js';
import { killIfRunning, leftovers, useVerifyWorld, writeRichTree, writeUnderFlex } from './verify-world.js';

/**
 * A verify stopped half way (an operator's Ctrl-C while the CSI half has the volume published) still
 * tears down what it set up and stops its private server (flex/migrate/verify.ts sweep): nothing is
 * left mounted, attached or running, and it says it was interrupted, exit 1.
 */
const world = useVerifyWorld();
let child: ChildProcess | undefined;

afterEach(async () => {
  // A test that timed out or threw before the verify ended must not leave it running into the next
  // test or the world's cleanup (test/migrate/verify-world.ts afterAll releases what it mounted).
  await killIfRunning(child);
  child = undefined;
  expect(await leftovers(world())).toEqual([]);
});

describe('migrate verify: interrupted', () => {
  it('SIGINT with the volume published through CSI: torn down, server stopped, exit 1', { timeout: 300_000 }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'int-1', '--size', '32Mi'])).exitCode).toBe(0);
    await writeUnderFlex(s, 'int-1', (dir) => writeRichTree(dir, 'int'));
    const verify = spawn(FLEX_BIN, ['migrate', 'verify', 'int-1'], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin', ...s.env } });
    child = verify;
    let stdout = '';
    let signalled = false;
    verify.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!signalled && /\[csi \] NodePublishVolume +OK/.test(stdout)) {
        signalled = true;
        verify.kill('SIGINT');
      }
    });
    const code = await new Promise<number | null>((done) => verify.on('close', done));
    expect(signalled, stdout).toBe(true);
    expect(code).toBe(1);
    expect(stdout).toMatch(/verdict: FAILED: interrupted by SIGINT/);
    // The rollback half never started, and the CSI half's teardown ran.
    expect(stdout).not.toMatch(/3\. Rollback/);
    expect(stdout).toMatch(/NodeUnpublishVolume/);
    // One line per call: the interrupt stops the run, it does not turn a call that succeeded into a failure.
    const calls = stdout.split('\n').flatMap((l) => /^ {2}\[csi \] (\S+)/.exec(l)?.slice(1) ?? []);
    expect(calls, stdout).toEqual([...new Set(calls)]);
    expect(calls).toContain('NodeUnpublishVolume');
    const inspect = await runAdmin(s.env, ['volume', 'inspect', 'int-1']);
    expect((JSON.parse(inspect.stdout) as { volume: { attachments: unknown[] } }).volume.attachments).toEqual([]);
  });
});
