import { readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, FLEX_BIN, runAdmin } from '../helpers/flex-runner.js';
import { createScratch, loopsLeftUnder, mountsUnder, type Scratch } from '../helpers/scratch.js';

/**
 * `twinvol flex check --node NAME` (flex/check.ts) against twinvol's own FlexVolume executable on a
 * node whose config names a node other than the host: without the flag the check attached as the
 * host name, which twinvol's driver refuses, so twinvol's own driver "did not run" on such a node.
 */
const NODE = 'flex-check-node-7f3e';
let s: Scratch;
// TMPDIR: the checker's scratch kubelet dir goes under the world's kubelet dir, where twinvol's own
// executable accepts paths (README.md, flex check).
const env = () => ({ ...s.env, TMPDIR: s.kubeletDir });
const check = (...args: string[]): Promise<CliResult> => runAdmin(env(), ['flex', 'check', FLEX_BIN, '--attachable', '--json', '--options', JSON.stringify({ volumeId: 'checked' }), ...args]);

interface Report {
  steps: { step: string; result: string; detail: string }[];
  verdict: { kind: string };
}

beforeAll(async () => {
  expect(hostname()).not.toBe(NODE);
  s = createScratch(NODE);
  const created = await runAdmin(s.env, ['volume', 'create', 'checked', '--size', '32Mi']);
  if (created.exitCode !== 0) throw new Error(`volume create failed: ${created.stderr}`);
}, 30_000);

afterAll(() => s?.cleanup());

describe('twinvol flex check --node', () => {
  it("with the config's node name, twinvol's own driver runs its whole lifecycle clean", async () => {
    const r = await check('--node', NODE);
    expect(r.stderr).toBe('');
    expect(r.exitCode).toBe(0);
    const report = JSON.parse(r.stdout) as Report;
    expect(report.steps.filter((st) => st.result !== 'pass')).toEqual([]);
    expect(report.steps.map((st) => st.step)).toContain('detach #2');
    expect(report.verdict.kind).toBe('kubelet');
  }, 60_000);

  it('without it, the host name: waitforattach on this node refuses an attachment to another, and the check says the driver does not run', async () => {
    const r = await check();
    expect(r.exitCode).toBe(1);
    const report = JSON.parse(r.stdout) as Report;
    expect(report.steps.find((st) => st.step === 'waitforattach #1')).toMatchObject({ result: 'fail', detail: expect.stringContaining(`attached to node ${hostname()}, not to this node ${NODE}`) });
    expect(report.verdict.kind).toBe('none');
  }, 60_000);

  it.each([
    [['--node', 'Bad Node'], '--node "Bad Node" may only hold'],
    [['--node', 'a'.repeat(254)], '--node is longer than 253 bytes'],
    [['--node', ''], '--node is given an empty value'],
    [['--node'], 'Not enough arguments following: node'],
  ])('%j: exit 2, one line naming --node, nothing run', async (args, message) => {
    const r = await check(...args);
    expect(r).toMatchObject({ exitCode: 2, stdout: '' });
    expect(r.stderr).toMatch(/^twinvol: [^\n]+\n$/);
    expect(r.stderr).toContain(message);
  });

  it('leaves no mount, loop device, scratch dir or attachment behind', async () => {
    const inspected = await runAdmin(s.env, ['volume', 'inspect', 'checked']);
    expect(JSON.parse(inspected.stdout)).toMatchObject({ volume: { attachments: [] }, mountsOnThisNode: [] });
    expect(mountsUnder(s.root)).toEqual([]);
    expect(await loopsLeftUnder(s.root)).toEqual([]);
    expect(readdirSync(s.kubeletDir).filter((n) => n.startsWith('twinvol-check-'))).toEqual([]);
  });
});
