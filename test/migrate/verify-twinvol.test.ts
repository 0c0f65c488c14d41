import { copyFileSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { mountCap, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { CSI_BIN, launchCsi } from '../csi/helpers/server.js';
import { collect } from '../helpers/collect.js';
import { expectSuccess, FLEX_BUILDS, flexOptions, runAdmin, runFlex } from '../helpers/flex-runner.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { leftovers, parseReport, useVerifyWorld, verify, type VerifyJson, writeRichTree, writeUnderFlex } from './verify-world.js';

/**
 * `twinvol migrate verify` on twinvol's own volumes (issue 10, item 2): data written through the
 * FlexVolume executable as kubelet runs it is read back through a private twinvol-csi byte for byte,
 * and through FlexVolume again; what CSI wrote, FlexVolume reads. A volume in use is refused with
 * nothing touched; bad input is one line. After every test nothing is left: no mount, loop device,
 * server or scratch dir.
 */
const world = useVerifyWorld();
const MiB = 2 ** 20;
// Each verify runs some twenty processes and a server: on a loaded 2-core machine a minute or more.
const SLOW = 300_000;
// The rich tree (test/migrate/verify-world.ts): the root, app, app/conf.d, main.conf, blob.bin,
// current, tmp, empty, dangling; its bytes: "tag=<tag>\n" and 1 MiB.
const richEntries = 9;
const richBytes = (tag: string) => `tag=${tag}\n`.length + MiB;

afterEach(async () => {
  expect(await leftovers(world())).toEqual([]);
});

describe('migrate verify: twinvol volumes', () => {
  let blockDigest = '';

  it('a block volume reads the same through FlexVolume, CSI and FlexVolume again', { timeout: SLOW }, async () => {
    const s = world();
    const admin = await runAdmin(s.env, ['volume', 'create', 'blk-1', '--size', '32Mi']);
    expect(admin.exitCode, admin.stderr).toBe(0);
    await writeUnderFlex(s, 'blk-1', (dir) => writeRichTree(dir, 'flex'));

    const first = parseReport(await verify(s, ['blk-1', '--json']));
    expect(first.verdict, first.error).toBe('match');
    const flex = first.sums.flex;
    // ext4 adds lost+found to what was written.
    expect(flex?.tree.entries).toBe(richEntries + 1);
    expect(flex?.tree.bytes).toBe(richBytes('flex'));
    expect(flex?.device?.bytes).toBe(32 * MiB);
    for (const phase of ['csi', 'rollback'] as const) {
      expect(first.sums[phase]?.tree.digest).toBe(flex?.tree.digest);
      expect(first.sums[phase]?.device?.digest).toBe(flex?.device?.digest);
    }
    blockDigest = flex?.tree.digest ?? '';
    // Every model's calls ran, in kubelet's and the sidecars' order.
    const calls = first.steps.filter((st) => st.model !== 'host').map((st) => st.call);
    expect(calls.filter((c) => c === 'mountdevice')).toHaveLength(2);
    expect(calls.filter((c) => ['ControllerPublishVolume', 'NodeStageVolume', 'NodePublishVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume', 'ControllerUnpublishVolume'].includes(c))).toEqual([
      'ControllerPublishVolume',
      'NodeStageVolume',
      'NodePublishVolume',
      'NodeUnpublishVolume',
      'NodeUnstageVolume',
      'ControllerUnpublishVolume',
    ]);
    // The PV name verify made up for twinvol's attach is not left in the catalog.
    expect(existsSync(join(s.dataRoot, 'pvs')) ? readdirSync(join(s.dataRoot, 'pvs')) : []).toEqual(['pv-blk-1.json']);
  });

  it('after the move, what the workload wrote through CSI reads the same through FlexVolume (the rollback), through --csi-endpoint', { timeout: SLOW }, async () => {
    const s = world();
    expect(blockDigest, 'the block volume test ran first').not.toBe('');
    let rollback: VerifyJson['sums']['rollback'];
    const csi = await launchCsi(s);
    try {
      const c = csi.client;
      const cap = mountCap('ext4');
      await c.call('Controller', 'ControllerPublishVolume', { volume_id: 'blk-1', node_id: 'node-a', volume_capability: cap });
      const staging = stagingPath(s.kubeletDir, 'blk-1');
      mkdirSync(staging, { recursive: true });
      await c.call('Node', 'NodeStageVolume', { volume_id: 'blk-1', staging_target_path: staging, volume_capability: cap });
      const target = targetPath(s.kubeletDir, 'csi-writer', 'pv-blk-1');
      await c.call('Node', 'NodePublishVolume', { volume_id: 'blk-1', staging_target_path: staging, target_path: target, volume_capability: cap });
      writeFileSync(join(target, 'written-by-csi'), 'after the move\n');
      await c.call('Node', 'NodeUnpublishVolume', { volume_id: 'blk-1', target_path: target });
      await c.call('Node', 'NodeUnstageVolume', { volume_id: 'blk-1', staging_target_path: staging });
      await c.call('Controller', 'ControllerUnpublishVolume', { volume_id: 'blk-1', node_id: 'node-a' });
      // This time through the operator's own server (--csi-endpoint), not a private one.
      const second = parseReport(await verify(s, ['blk-1', '--json', '--csi-endpoint', `unix://${s.socketPath}`]));
      expect(second.verdict, second.error).toBe('match');
      expect(second.csi).toBe(`unix://${s.socketPath}`);
      expect(second.steps.some((st) => st.call.startsWith('start twinvol-csi'))).toBe(false);
      rollback = second.sums.rollback;
    } finally {
      await csi.stop();
    }
    // FlexVolume read what CSI wrote: one more entry, its bytes, another tree.
    expect(rollback?.tree.entries).toBe(richEntries + 2);
    expect(rollback?.tree.bytes).toBe(richBytes('flex') + 'after the move\n'.length);
    expect(rollback?.tree.digest).not.toBe(blockDigest);
  });

  it('a dir volume: modes, owners, symlinks and content survive the round trip; the report says so', { timeout: SLOW }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'dir-1', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    await writeUnderFlex(s, 'dir-1', (dir) => writeRichTree(dir, 'dir'));
    const r = await verify(s, ['dir-1']);
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/verdict: MATCH: volume dir-1 reads the same/);
    const sums = r.stdout.split('\n').filter((l) => /^ {2}(FlexVolume|CSI|FlexVolume again) +tree /.test(l));
    expect(sums).toHaveLength(3);
    const digests = new Set(sums.map((l) => /tree ([0-9a-f]{16}) \((\d+) entries, (\d+) bytes\)/.exec(l)?.slice(1).join(' ')));
    expect([...digests]).toHaveLength(1);
    expect([...digests][0]).toMatch(new RegExp(` ${richEntries} ${richBytes('dir')}$`));
  });

  it('--pv: a twinvol PV without a volumeId option names the volume by its own name, as the executable reads it', { timeout: SLOW }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'pvn-1', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const pvFile = (name: string) => {
      const file = join(s.root, `${name}.yaml`);
      writeFileSync(file, `apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: ${name}}\nspec:\n  capacity: {storage: 16Mi}\n  accessModes: [ReadWriteOnce]\n  flexVolume: {driver: twinvol/twinvol}\n`);
      return file;
    };
    const r = await verify(s, ['pvn-1', '--pv', pvFile('pvn-1'), '--json']);
    const report = parseReport(r);
    expect(report.verdict, report.error).toBe('match');
    expect(r.exitCode).toBe(0);
    const other = await verify(s, ['pvn-1', '--pv', pvFile('pvn-other')]);
    expect(other.exitCode).toBe(2);
    expect(other.stdout).toBe('');
    expect(other.stderr.trim().split('\n')).toHaveLength(1);
    expect(other.stderr).toMatch(/PersistentVolume pvn-other names volume "pvn-other" \(no volumeId option: its own name\), not the volume pvn-1 asked for/);
  });

  it('refuses a volume attached and staged under FlexVolume, and touches nothing', async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'busy-1', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const opts = flexOptions('pv-busy', { volumeId: 'busy-1' });
    const ok = async (...argv: string[]) => expectSuccess(await runFlex(s.env, argv));
    await ok('attach', opts, 'node-a');
    const global = deviceMountPath(s.kubeletDir, 'pv-busy');
    await ok('mountdevice', global, '', opts);
    const before = await runAdmin(s.env, ['volume', 'inspect', 'busy-1']);
    try {
      const r = await verify(s, ['busy-1']);
      expect(r.exitCode).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/refused: volume busy-1 is attached to node-a/);
      // Nothing touched: the records read the same, and no server, mount or dir of verify's exists.
      expect((await runAdmin(s.env, ['volume', 'inspect', 'busy-1'])).stdout).toBe(before.stdout);
      expect((await leftovers(s)).filter((l) => !l.includes(global))).toEqual([]);
    } finally {
      await ok('unmountdevice', global);
      await ok('detach', 'pv-busy', 'node-a');
    }
  });

  // deploy/image/Containerfile installs twinvol and twinvol-csi side by side in /usr/local/bin: verify
  // once looked only in ../csi/ (dist/'s layout) and stopped with "no CSI server to start" there.
  it('starts the twinvol-csi beside the executable, as the image installs them', { timeout: SLOW }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'side-1', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const bin = join(s.root, 'usr-local-bin');
    mkdirSync(bin);
    const flexDir = dirname(FLEX_BUILDS.bundle);
    for (const name of ['twinvol', 'twinvol.modules', 'twinvol-mount.node']) copyFileSync(join(flexDir, name), join(bin, name));
    copyFileSync(CSI_BIN, join(bin, 'twinvol-csi'));
    const r = await collect(join(bin, 'twinvol'), ['migrate', 'verify', 'side-1', '--json'], { env: { PATH: '/usr/bin:/bin', ...s.env } });
    expect(r.code, r.stderr).toBe(0);
    const report = parseReport({ exitCode: r.code ?? -1, stdout: r.stdout, stderr: r.stderr });
    expect(report.verdict, report.error).toBe('match');
    expect(report.csi).toBe(`private twinvol-csi (${join(bin, 'twinvol-csi')})`);
  });

  it('bad input is one line on stderr, exit 2 for what does not parse and 1 for what is not there', async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'ok-1', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const notPv = join(s.root, 'not-a-pv.yaml');
    writeFileSync(notPv, 'kind: ConfigMap\nmetadata: {name: x}\n');
    // Both parse; their aliases fail only when resolved: one names no anchor, one expands 10^9 times.
    const noAnchor = join(s.root, 'no-anchor.yaml');
    writeFileSync(noAnchor, 'apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: *nope}\n');
    const bomb = join(s.root, 'bomb.yaml');
    const levels = Array.from({ length: 9 }, (_, i) => `a${i}: &a${i} [${Array(10).fill(i ? `*a${i - 1}` : '"x"').join(',')}]`);
    writeFileSync(bomb, `${levels.join('\n')}\nkind: PersistentVolume\napiVersion: v1\nmetadata: {name: x}\nspec: {x: *a8}\n`);
    const cases: [string[], number, RegExp][] = [
      [['no-such-volume'], 1, /volume no-such-volume does not exist/],
      [['bad/id'], 2, /volume/],
      [['ok-1', '--csi-endpoint', 'tcp://1.2.3.4:5'], 2, /--csi-endpoint "tcp:\/\/1.2.3.4:5" must be unix:\/\/\/absolute\/path/],
      [['ok-1', '--csi-endpoint', `unix://${join(s.root, 'nobody.sock')}`], 1, /no CSI server at unix:\/\//],
      [['ok-1', '--csi-bin', join(s.root, 'no-such-csi')], 2, /no CSI server to start: .*no-such-csi does not exist/],
      [['ok-1', '--pv', notPv], 2, /holds no PersistentVolume/],
      [['ok-1', '--pv', join(s.root, 'missing.yaml')], 2, /cannot be read/],
      [['ok-1', '--pv', noAnchor], 2, /--pv .* is not YAML or JSON: Unresolved alias/],
      [['ok-1', '--pv', bomb], 2, /--pv .* is not YAML or JSON: Excessive alias count/],
    ];
    for (const [args, code, message] of cases) {
      const r = await verify(s, args);
      expect({ args, code: r.exitCode, stdout: r.stdout }).toEqual({ args, code, stdout: '' });
      expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/\bat .*\.(js|ts|cjs):\d+/);
    }
  });
});
