import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type CsiScratch, createCsiScratch, releaseAll } from './helpers/scratch.js';
import { runCsiOnce, scratchArgs, serverEnv } from './helpers/server.js';

/**
 * twinvol-csi's start-up as an operator meets it (issue 11): --version, a node server that is not
 * told its node id, a bad endpoint, no root. Each refusal is ONE line of ours on stderr (the
 * orchestrator shows the last line of a failed container), never grpc-js's own line or the usage
 * text, and a refused command line creates nothing.
 */
const scratches: CsiScratch[] = [];
afterEach(() => {
  for (const s of scratches.splice(0)) releaseAll(s.root);
});
function fresh(): CsiScratch {
  const s = createCsiScratch('node-a');
  scratches.push(s);
  return s;
}
/** Everything in the scratch world besides what createCsiScratch made. */
const madeIn = (s: CsiScratch) => readdirSync(s.root).filter((n) => !['config.json', 'kubelet'].includes(n));
const oneLine = (stderr: string) => expect(stderr, stderr).toMatch(/^twinvol-csi: [^\n]+\n$/);

describe('twinvol-csi start-up', () => {
  it('--version prints the version and needs nothing else, not even root', async () => {
    const r = await runCsiOnce(['--version'], { PATH: '/usr/bin:/bin' }, ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']);
    expect(r).toEqual({ code: 0, stdout: expect.stringMatching(/^twinvol-csi \d+\.\d+\.\d+\n$/), stderr: '' });
  });

  it.each([['node'], ['all']])('--mode %s without --node-id is refused, not served under the host name', async (mode) => {
    const s = fresh();
    const args = scratchArgs(s, 'unused').filter((a, i, all) => a !== '--node-id' && all[i - 1] !== '--node-id');
    const r = await runCsiOnce([...args, '--mode', mode], serverEnv(s));
    expect(r.code).toBe(2);
    oneLine(r.stderr);
    expect(r.stderr).toContain(`--mode ${mode} needs --node-id`);
    expect(madeIn(s)).toEqual([]);
  });

  it('a controller needs no node id; TWINVOL_NODE_NAME stands in for --node-id', async () => {
    // Refused only by the socket path left as a plain file: proof that the node-id rule let it through.
    const s = fresh();
    mkdirSync(join(s.root, 'plugin'));
    writeFileSync(s.socketPath, '');
    const bare = scratchArgs(s, 'unused').slice(0, 2);
    for (const [args, env] of [[[...bare, '--mode', 'controller'], {}], [bare, { TWINVOL_NODE_NAME: 'node-a' }]] as const) {
      const r = await runCsiOnce([...args, '--data-root', s.dataRoot, '--state-dir', s.stateDir], { ...serverEnv(s), ...env });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toBe(`twinvol-csi: cannot start: ${s.socketPath} exists and is not a socket; not removing it\n`);
    }
  });

  it('a socket path longer than a unix socket holds is a usage error, before anything is made', async () => {
    const s = fresh();
    const r = await runCsiOnce([...scratchArgs(s, 'node-a').slice(2), '--endpoint', `unix://${s.root}/${'d'.repeat(100)}/csi.sock`], serverEnv(s));
    expect(r.code).toBe(2);
    oneLine(r.stderr);
    expect(r.stderr).toMatch(/--endpoint socket path is \d+ bytes; a unix socket path holds at most 107/);
    expect(madeIn(s)).toEqual([]);
  });

  it.each([
    ['under a plain file', (s: CsiScratch) => `${s.configPath}/csi.sock`, /^twinvol-csi: cannot start: cannot look at .*config\.json\/csi\.sock: a part of its path is not a directory \(ENOTDIR\)/],
    ['where nothing may bind', () => '/proc/csi.sock', /^twinvol-csi: cannot listen on unix:\/\/\/proc\/csi\.sock: listen EACCES: permission denied \/proc\/csi\.sock\n$/],
  ])('an endpoint %s is one line of ours, not grpc-js\'s', async (_what, socket, message) => {
    const s = fresh();
    const r = await runCsiOnce([...scratchArgs(s, 'node-a').slice(2), '--endpoint', `unix://${socket(s)}`], serverEnv(s));
    expect(r.code).toBe(1);
    oneLine(r.stderr);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/No address added/);
  });

  it('without root it says so in one line, before it creates anything', async () => {
    const s = fresh();
    chmodSync(s.root, 0o755);
    const r = await runCsiOnce(scratchArgs(s, 'node-a'), serverEnv(s), ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('twinvol-csi: must run as root (it mounts filesystems and attaches loop devices); running as uid 65534\n');
    expect(madeIn(s)).toEqual([]);
    expect(existsSync(s.socketPath)).toBe(false);
  });
});
