import { lstatSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { wrappedTool } from '../helpers/tool-wrapper.js';
import { flexOptions, flexSession, mountOptions, podNamed } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch } from '../helpers/scratch.js';
import { useCsiServer } from '../csi/helpers/fixture.js';
import { MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';

/**
 * Secrets never reach a log, a reply, a record or a child's argv; state is not world-accessible. One
 * whole volume life per model, with a sentinel secret in every field that takes one, then a scan of
 * everything twinvol wrote (state dir, data root, logs) and of every argv its tools were given.
 */
const SENTINEL = 'S3NT1NEL-secret-value';
const SENTINEL_B64 = Buffer.from(SENTINEL).toString('base64');
const secrets = { password: SENTINEL, token: SENTINEL };

/** Every regular file below `dir` that twinvol wrote about a volume (data the pod wrote is not its). */
function files(dir: string, skip: (path: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (skip(path)) continue;
    const st = lstatSync(path);
    if (st.isDirectory()) out.push(...files(path, skip));
    else if (st.isFile()) out.push(path);
  }
  return out;
}

const volumeData = (path: string) => /\/volumes\/[^/]+\/(data|image\.img)$/.test(path) || /\/snapshots\/[^/]+\/(data|image\.img)$/.test(path);
const holding = (paths: string[]) => paths.filter((p) => [SENTINEL, SENTINEL_B64].some((s) => readFileSync(p).includes(s)));

describe('secrets and access: CSI', () => {
  const tools = createScratch('tools', '/tmp/twinvol-test-secret-tools-');
  // In afterAll rather than a finally: a test that times out never reaches its finally.
  afterAll(() => tools.cleanup());
  const TOOLS = ['mount', 'losetup', 'mkfs.ext4', 'cp', 'blkid'];
  const wrapped = TOOLS.map((t) => wrappedTool(tools.root, t));
  const csi = useCsiServer({ env: { PATH: `${wrapped.map((w) => w.dir).join(':')}:/usr/sbin:/usr/bin:/sbin:/bin` } });

  it('a whole life with secrets everywhere leaves them in no log, record, reply or argv', async () => {
    const cap = mountCap('ext4');
    const replies: unknown[] = [];
    const keep = <T>(r: T): T => (replies.push(r), r);
    keep(await csi.ctl('CreateVolume', { name: 'sec', volume_capabilities: [cap], capacity_range: size(32 * MiB), secrets }));
    keep(await csi.ctl('ControllerPublishVolume', { volume_id: 'sec', node_id: 'node-a', volume_capability: cap, secrets }));
    const staging = stagingPath(csi.s.kubeletDir, 'sec');
    const target = targetPath(csi.s.kubeletDir, 'pod-sec', 'sec');
    mkdirSync(staging, { recursive: true });
    mkdirSync(dirname(target), { recursive: true });
    keep(await csi.node('NodeStageVolume', { volume_id: 'sec', staging_target_path: staging, volume_capability: cap, secrets }));
    keep(await csi.node('NodePublishVolume', { volume_id: 'sec', staging_target_path: staging, target_path: target, volume_capability: cap, secrets }));
    keep(await csi.ctl('CreateSnapshot', { name: 'sec-snap', source_volume_id: 'sec', secrets }));
    keep(await csi.ctl('ControllerExpandVolume', { volume_id: 'sec', capacity_range: size(64 * MiB), secrets }));
    // Online ext4 growth may be refused on this host (docs/architecture.md, Known limits): the
    // answer, whichever it is, must not carry the secret.
    keep(await csi.node('NodeExpandVolume', { volume_id: 'sec', volume_path: target, secrets }).catch((e: Error) => e.message));
    // A refused call with a secret: the refusal must not quote it either.
    const refused = await csi.ctl('CreateVolume', { name: 'sec2', volume_capabilities: [cap], parameters: { backend: 'nope' }, secrets }).catch((e: Error) => e.message);
    expect(refused).toContain('backend "nope" is unknown');
    expect(refused).not.toContain(SENTINEL);
    keep(await csi.node('NodeUnpublishVolume', { volume_id: 'sec', target_path: target }));
    keep(await csi.node('NodeUnstageVolume', { volume_id: 'sec', staging_target_path: staging }));
    keep(await csi.ctl('ControllerUnpublishVolume', { volume_id: 'sec', node_id: 'node-a', secrets }));
    keep(await csi.ctl('DeleteSnapshot', { snapshot_id: 'sec-snap', secrets }));
    keep(await csi.ctl('DeleteVolume', { volume_id: 'sec', secrets }));

    expect(JSON.stringify(replies)).not.toContain(SENTINEL);
    expect(csi.server.logLines().join('\n')).not.toContain(SENTINEL);
    expect(holding([...files(csi.s.stateDir, volumeData), ...files(csi.s.dataRoot, volumeData)])).toEqual([]);
    const argv = wrapped.flatMap((w) => w.calls());
    // The wrappers saw the tools run: mkfs.ext4 at the create, cp for the snapshot (mounts, unmounts and
    // loop devices are system calls: shared/native-mount.ts).
    const ran = TOOLS.filter((_, i) => wrapped[i]!.calls().length > 0);
    expect(ran).toEqual(expect.arrayContaining(['mkfs.ext4', 'cp']));
    expect(argv.filter((a) => a.includes(SENTINEL))).toEqual([]);
  });
});

describe('secrets and access: FlexVolume and the state it writes', () => {
  const s = createScratch('node-a');
  afterAll(() => s.cleanup());
  const { ok } = flexSession(() => s.env);

  it('a whole life with kubernetes.io/secret/* options leaves them nowhere; records and their dirs are private', async () => {
    const opts = flexOptions('pv-sec', { volumeId: 'fsec', createIfMissing: 'true', size: '16Mi', backend: 'dir', 'kubernetes.io/secret/password': SENTINEL_B64 });
    const replies = [await ok('attach', opts, 'node-a')];
    const global = deviceMountPath(s.kubeletDir, 'pv-sec');
    replies.push(await ok('mountdevice', global, '', opts));
    const dir = podVolumeDir(s.kubeletDir, 'uid-sec', 'pv-sec');
    replies.push(await ok('mount', dir, mountOptions('pv-sec', podNamed('uid-sec'), { volumeId: 'fsec', 'kubernetes.io/secret/password': SENTINEL_B64 })));
    replies.push(await ok('unmount', dir), await ok('unmountdevice', global), await ok('detach', 'pv-sec', 'node-a'));
    expect(JSON.stringify(replies)).not.toContain(SENTINEL_B64);
    const written = [...files(s.stateDir, volumeData), ...files(s.dataRoot, volumeData)];
    expect(written.some((p) => p.endsWith('flex.log'))).toBe(true);
    expect(holding(written)).toEqual([]);

    // Records and the directories that hold them: nobody but root reads them.
    const records = written.filter((p) => p.endsWith('.json'));
    expect(records.length).toBeGreaterThan(1);
    for (const p of records) expect({ p, mode: (lstatSync(p).mode & 0o077).toString(8) }).toEqual({ p, mode: '0' });
    for (const d of ['volumes', 'pvs', 'nodes'].map((n) => join(s.dataRoot, n)).concat(join(s.stateDir, 'mounts')))
      expect({ d, mode: (lstatSync(d).mode & 0o077).toString(8) }).toEqual({ d, mode: '0' });
  });
});
