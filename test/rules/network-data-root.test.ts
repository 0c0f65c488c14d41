import { join } from 'node:path';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { createCsiScratch } from '../csi/helpers/scratch.js';
import { runCsiOnce, scratchArgs, serverEnv } from '../csi/helpers/server.js';
import { outcome } from '../csi/helpers/client.js';
import { useCsiServer } from '../csi/helpers/fixture.js';
import { MiB, mountCap, size } from '../csi/helpers/requests.js';
import { hasBindfs, mountBindfs, unmountBindfs } from '../helpers/bindfs.js';
import { flexOptions, runAdmin, runCli, runFlex } from '../helpers/flex-runner.js';

/**
 * Setting dataRootOnNetwork (shared/store/network-catalog.ts), asked of the three front ends over one
 * data root: the CSI server by its flag, the CLI and the FlexVolume executable by the config file.
 * While the share is not mounted the data root is the scratch's directory on /tmp, a local
 * filesystem; bindfs (FUSE) stands in for the share.
 */
// A controller: a node server registers its node in the catalog before it serves, so with the share
// missing it does not start at all (the last test).
const csi = useCsiServer({ nodeId: 'node-a', args: ['--mode', 'controller', '--data-root-on-network', 'true'] });
beforeAll(() => {
  writeFileSync(csi.s.env.TWINVOL_CONFIG!, JSON.stringify({ dataRootOnNetwork: true }));
  // As the manifests' hostPath (DirectoryOrCreate) leaves it when nothing is mounted there.
  mkdirSync(csi.s.dataRoot, { recursive: true });
});

const NOT_MOUNTED = /the data root .* lies on a local filesystem \(statfs type 0x[0-9a-f]+\), and setting dataRootOnNetwork says it is a network filesystem: is that filesystem mounted on this node\? Nothing was changed/;
const create = (name: string) => csi.ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
const flexAttach = (id: string) => runFlex(csi.s.env, ['attach', flexOptions(`pv-${id}`, { volumeId: id, createIfMissing: 'true', backend: 'dir', size: '1Mi' }), 'node-a']);

describe('a data root that must lie on a network filesystem, not mounted', () => {
  it('CSI CreateVolume and DeleteVolume answer UNAVAILABLE, saying why', async () => {
    for (const call of [() => create('n-1'), () => csi.ctl('DeleteVolume', { volume_id: 'n-1' })]) {
      const o = await outcome(call());
      expect(o.code).toBe('UNAVAILABLE');
      expect(o.message).toMatch(NOT_MOUNTED);
    }
  });

  it('the CLI exits 1 with one line, and FlexVolume answers Failure', async () => {
    const cli = await runCli(csi.s.env, ['create', 'n-2', '--backend', 'dir', '--size', '1Mi']);
    expect(cli.exitCode).toBe(1);
    expect(cli.stderr).toMatch(NOT_MOUNTED);
    expect(cli.stderr.trim().split('\n')).toHaveLength(1);
    const flex = await flexAttach('n-3');
    expect({ status: flex.reply.status, exitCode: flex.exitCode }).toEqual({ status: 'Failure', exitCode: 1 });
    expect(String(flex.reply.message)).toMatch(NOT_MOUNTED);
    expect(existsSync(join(csi.s.dataRoot, 'volumes'))).toBe(false);
  });

  it('twinvol status says so first, and exits 1', async () => {
    const r = await runAdmin(csi.s.env, ['status', '--json']);
    expect(r.exitCode).toBe(1);
    const problems = (JSON.parse(r.stdout) as { problems: { kind: string; subject: string; detail: string }[] }).problems;
    expect(problems[0]).toEqual({
      kind: 'data-root-not-mounted',
      subject: csi.s.dataRoot,
      detail: expect.stringMatching(/^the data root lies on a local filesystem \(statfs type 0x[0-9a-f]+\), and setting dataRootOnNetwork says it is a network filesystem: mount it/),
    });
  });
});

describe.skipIf(!hasBindfs)('the same data root once the share is mounted, and after it went away', () => {
  it('every front end makes its volume on the share; once it is gone, a delete changes nothing', async () => {
    const share = join(csi.s.root, 'share');
    mountBindfs(share, csi.s.dataRoot);
    try {
      await create('m-csi');
      expect((await runCli(csi.s.env, ['create', 'm-cli', '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
      expect((await flexAttach('m-flex')).reply.status).toBe('Success');
      for (const id of ['m-csi', 'm-cli', 'm-flex']) expect(existsSync(join(share, 'volumes', id, 'volume.json')), id).toBe(true);
      const status = JSON.parse((await runAdmin(csi.s.env, ['status', '--json'])).stdout) as { problems: { kind: string }[] };
      expect(status.problems.map((p) => p.kind)).not.toContain('data-root-not-mounted');
    } finally {
      unmountBindfs(csi.s.dataRoot);
    }
    expect((await outcome(csi.ctl('DeleteVolume', { volume_id: 'm-csi' }))).code).toBe('UNAVAILABLE');
    expect(existsSync(join(share, 'volumes', 'm-csi', 'volume.json'))).toBe(true);
  });
});

describe('a node server on a data root whose share is not mounted', () => {
  it('does not start, and its one line says why (the pod restarts until the share is there)', async () => {
    const w = createCsiScratch('node-n');
    try {
      mkdirSync(w.dataRoot, { recursive: true });
      const r = await runCsiOnce([...scratchArgs(w, 'node-n'), '--mode', 'node', '--data-root-on-network', 'true'], serverEnv(w));
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/twinvol-csi: cannot start: /);
      expect(r.stderr).toMatch(NOT_MOUNTED);
    } finally {
      w.cleanup();
    }
  });
});
