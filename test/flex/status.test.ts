import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Inventory, type ProblemKind, publish, stage } from '../../shared/index.js';
import { coreIn } from '../shared/core-scratch.js';
import { vid } from '../helpers/ids.js';
import { stagingPath, targetPath } from '../csi/helpers/requests.js';
import { flexOptions, flexSession, mountOptions, podNamed, runAdmin } from '../helpers/flex-runner.js';
import { deviceMountPath, podVolumeDir } from '../helpers/kubelet-paths.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// `twinvol status` (shared/core/inventory.ts, flex/status.ts): a world twinvol set up itself is
// consistent; each inconsistency is then made for real, behind twinvol's back, and must be found by
// name, with exit code 1. The scratch's cleanup unmounts and detaches whatever a test left.
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const { ok, createVolume } = flexSession(() => s.env);

async function status(): Promise<{ exitCode: number; inventory: Inventory }> {
  const r = await runAdmin(s.env, ['status', '--json']);
  expect(r.stderr).toBe('');
  return { exitCode: r.exitCode, inventory: JSON.parse(r.stdout) as Inventory };
}

/** The problems found, as "kind subject" lines, sorted: what a test expects by name. */
function problems(inv: Inventory): string[] {
  return inv.problems.map((p) => `${p.kind} ${p.subject}`).sort();
}

/** kubelet and the controller-manager's attachable sequence for one pod (as test/flex/lifecycle.test.ts). */
async function inUse(id: string, podUid: string): Promise<{ global: string; dir: string }> {
  const pv = `pv-${id}`;
  const opts = flexOptions(pv, { volumeId: id });
  await ok('attach', opts, 'node-a');
  const wait = await ok('waitforattach', '', opts);
  const global = deviceMountPath(s.kubeletDir, pv);
  await ok('mountdevice', global, String(wait.reply.device ?? ''), opts);
  const dir = podVolumeDir(s.kubeletDir, podUid, pv);
  await ok('mount', dir, mountOptions(pv, podNamed(podUid)));
  return { global, dir };
}

const problem = (kind: ProblemKind, subject: string, volumeId?: string) => expect.objectContaining({ kind, subject, ...(volumeId ? { volumeId } : {}) });

describe('twinvol status', () => {
  it('says a world twinvol made itself is consistent: volumes, attachments, mounts, loop devices, exit 0', async () => {
    await createVolume('blk', '--size', '8Mi');
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    await createVolume('idle', '--backend', 'dir', '--size', '1Mi');
    const b = await inUse('blk', 'pod-1');
    const d = await inUse('dir', 'pod-2');
    // Attached and bound, not yet mounted: FlexVolume between waitforattach and mountdevice.
    await createVolume('half', '--size', '8Mi');
    await ok('attach', flexOptions('pv-half', { volumeId: 'half' }), 'node-a');
    await ok('waitforattach', '', flexOptions('pv-half', { volumeId: 'half' }));

    const { exitCode, inventory } = await status();
    expect(inventory.problems).toEqual([]);
    expect({ exitCode, consistent: inventory.consistent }).toEqual({ exitCode: 0, consistent: true });
    expect(inventory.volumes.map((v) => [v.id, v.attachments.map((a) => a.node)])).toEqual([['blk', ['node-a']], ['dir', ['node-a']], ['half', ['node-a']], ['idle', []]]);
    expect(inventory.nodes.map((n) => n.nodeId)).toEqual(['node-a']);
    expect(inventory.mounts.map((m) => [m.volumeId, m.kind, m.path, Boolean(m.mounted)]).sort()).toEqual(
      [['blk', 'publish', b.dir, true], ['blk', 'stage', b.global, true], ['dir', 'publish', d.dir, true], ['dir', 'stage', d.global, true]].sort(),
    );
    expect(inventory.loops.map((l) => l.volumeId).sort()).toEqual(['blk', 'half']);

    const text = await runAdmin(s.env, ['status']);
    expect(text.exitCode).toBe(0);
    const lines = text.stdout.split('\n');
    for (const header of [/^ID +BACKEND +SIZE +FSTYPE +ACCESS +ATTACHMENTS$/, /^VOLUME +KIND +PATH +MODE +MOUNTED$/, /^DEVICE +VOLUME +BACKING FILE$/]) expect(lines.some((l) => header.test(l)), String(header)).toBe(true);
    expect(text.stdout).toContain('consistent:');
    expect(text.stdout).not.toContain('PROBLEMS');
  });

  it("counts a dir volume's CSI staging, its record alone, as consistent, and says what its pods bind", async () => {
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    // Attached as a CSI controller would (FlexVolume's attach registers the node too), staged by the core as twinvol-csi's NodeStageVolume does.
    await ok('attach', flexOptions('pv-dir', { volumeId: 'dir' }), 'node-a');
    const core = coreIn(s);
    const staging = stagingPath(s.kubeletDir, 'dir');
    await stage(core, vid('dir'), staging, { readonly: false });

    const { exitCode, inventory } = await status();
    expect(inventory.problems).toEqual([]);
    expect(exitCode).toBe(0);
    const data = join(s.dataRoot, 'volumes/dir/data');
    expect(inventory.mounts).toEqual([expect.objectContaining({ volumeId: 'dir', kind: 'stage', path: staging, bindsFrom: data })]);
    expect(inventory.mounts[0]?.mounted).toBeUndefined();
    expect((await runAdmin(s.env, ['status'])).stdout).toContain(`(record only; pods bind ${data})`);
  });

  it("shows a read-only raw publish's own device, and finds one an older twinvol bound writable", async () => {
    await createVolume('raw', '--size', '8Mi');
    await ok('attach', flexOptions('pv-raw', { volumeId: 'raw' }), 'node-a');
    const core = coreIn(s);
    const staging = stagingPath(s.kubeletDir, 'raw');
    const target = targetPath(s.kubeletDir, 'pod-r', 'raw');
    mkdirSync(join(target, '..'), { recursive: true });
    const { device } = await stage(core, vid('raw'), staging, { readonly: false, block: true });
    await publish(core, vid('raw'), target, { readonly: true, block: true, stagingPath: staging, via: 'csi' });

    const before = await status();
    expect(before.inventory.problems).toEqual([]);
    expect(before.inventory.loops.map((l) => l.readOnly).sort()).toEqual([false, true]);
    expect((await runAdmin(s.env, ['status'])).stdout).toContain('(read-only)');

    // What a publish before read-only devices made: the staging's own device, bound with a read-only flag.
    execFileSync('umount', [target]);
    execFileSync('mount', ['--bind', device, target]);
    execFileSync('mount', ['-o', 'remount,bind,ro', target]);
    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(inventory.problems).toEqual([problem('writable-read-only-publish', target, 'raw')]);
    expect(inventory.problems[0]?.detail).toContain(`binds ${device}, which takes writes`);

    // Held to reading by a read-only attachment rather than by its own flag: the same problem.
    const record = await core.nodeState.findByPath(target);
    if (!record) throw new Error('the publish record is gone');
    await core.nodeState.put({ ...record, readonly: false });
    expect((await status()).inventory.problems).toEqual([]);
    await core.catalog.updateVolume('raw', (v) => ({ ...v, attachments: v.attachments.map((a) => ({ ...a, readonly: true })) }));
    expect(problems((await status()).inventory)).toEqual([`writable-read-only-publish ${target}`]);
  });

  it('finds a mount without a flag its record was made with: a bind killed before its remount', async () => {
    await createVolume('rod', '--backend', 'dir', '--size', '1Mi');
    await createVolume('ros', '--size', '8Mi');
    const dir = podVolumeDir(s.kubeletDir, 'pod-ro', 'pv-rod');
    await ok('mount', dir, mountOptions('pv-rod', podNamed('pod-ro'), { volumeId: 'rod', 'kubernetes.io/readwrite': 'ro' }));
    await ok('attach', flexOptions('pv-ros', { volumeId: 'ros' }), 'node-a');
    const staging = stagingPath(s.kubeletDir, 'ros');
    await stage(coreIn(s), vid('ros'), staging, { readonly: true, mountFlags: ['noexec'] });
    expect((await status()).inventory.problems).toEqual([]);

    // What a call killed between the two steps left: the mount there, without its flags.
    execFileSync('mount', ['-o', 'remount,bind,rw', dir]);
    execFileSync('mount', ['-o', 'remount,rw,exec', staging]);
    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(problems(inventory)).toEqual([`mount-without-its-flags ${dir}`, `mount-without-its-flags ${staging}`].sort());
    expect(inventory.problems.find((p) => p.subject === dir)?.detail).toContain('was made ro, which its mount lacks');
    expect(inventory.problems.find((p) => p.subject === staging)?.detail).toContain('was made ro,noexec, which its mount lacks');
  });

  it('finds a staged volume unmounted behind its record\'s back', async () => {
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    const { global } = await inUse('dir', 'pod-1');
    execFileSync('umount', [global]);

    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(inventory.consistent).toBe(false);
    expect(inventory.problems).toEqual([problem('record-without-mount', global, 'dir')]);
    const text = await runAdmin(s.env, ['status']);
    expect(text.exitCode).toBe(1);
    expect(text.stdout).toMatch(/^PROBLEMS \(1\)\nPROBLEM +SUBJECT +DETAIL\nrecord-without-mount +\S+/m);
  });

  it('finds mounts at twinvol\'s FlexVolume and CSI paths that it has no record of, and its data mounted elsewhere', async () => {
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    const csiStaging = stagingPath(s.kubeletDir, 'nobody-made-this');
    const flexDevice = deviceMountPath(s.kubeletDir, 'pv-by-hand');
    const csiPod = targetPath(s.kubeletDir, 'pod-9', 'pv-by-hand');
    // kubelet writes vol_data.json beside a CSI pod mount: that is how a pod mount names its driver.
    mkdirSync(csiPod, { recursive: true });
    writeFileSync(join(csiPod, '..', 'vol_data.json'), JSON.stringify({ driverName: 'csi.twinvol.io', volumeHandle: 'by-hand' }));
    for (const path of [csiStaging, flexDevice, csiPod]) {
      mkdirSync(path, { recursive: true });
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', path]);
    }
    // A volume's data bound into a pod by hand, at a FlexVolume pod path.
    const bound = podVolumeDir(s.kubeletDir, 'pod-8', 'pv-dir');
    mkdirSync(bound, { recursive: true });
    execFileSync('mount', ['--bind', join(s.dataRoot, 'volumes/dir/data'), bound]);
    // Another driver's CSI staging is not twinvol's business.
    const other = join(s.kubeletDir, 'plugins/kubernetes.io/csi/other.example.com', 'a'.repeat(64), 'globalmount');
    mkdirSync(other, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', other]);

    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(problems(inventory)).toEqual([bound, csiPod, csiStaging, flexDevice].map((p) => `mount-without-record ${p}`).sort());
    expect(inventory.problems.find((p) => p.subject === bound)?.volumeId).toBe('dir');
  });

  it('finds a loop device bound to a volume\'s image without any record', async () => {
    await createVolume('blk', '--size', '8Mi');
    const device = execFileSync('losetup', ['-f', '--show', join(s.dataRoot, 'volumes/blk/image.img')], { encoding: 'utf8' }).trim();

    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(inventory.problems).toEqual([problem('loop-without-record', device, 'blk')]);
    expect(inventory.loops).toEqual([expect.objectContaining({ device, volumeId: 'blk', deleted: false })]);
  });

  it('finds an attachment to a node that is not registered', async () => {
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    await ok('attach', flexOptions('pv-dir', { volumeId: 'dir' }), 'node-b');
    expect((await status()).exitCode).toBe(0);
    // The node's registration removed, as by an administrator cleaning up a node that left.
    rmSync(join(s.dataRoot, 'nodes/node-b.json'));

    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(inventory.problems).toEqual([problem('attachment-to-unregistered-node', 'node-b', 'dir')]);
    expect(inventory.problems[0]?.detail).toContain('twinvol volume release dir --node node-b --force');
  });

  it('counts the attachment of a mount on an install without attach as consistent: no attach ever registered its node', async () => {
    // Once reported as an attachment to an unregistered node, for a world twinvol made itself.
    writeFileSync(s.env.TWINVOL_CONFIG ?? '', JSON.stringify({ flexAttach: false }));
    await createVolume('na', '--backend', 'dir', '--size', '1Mi');
    await ok('mount', podVolumeDir(s.kubeletDir, 'pod-na', 'pv-na'), mountOptions('pv-na', podNamed('pod-na'), { volumeId: 'na' }));
    const { exitCode, inventory } = await status();
    expect(inventory.volumes.map((v) => v.attachments.map((a) => [a.node, a.implicit]))).toEqual([[['node-a', true]]]);
    expect(inventory.nodes).toEqual([]);
    expect({ exitCode, problems: inventory.problems }).toEqual({ exitCode: 0, problems: [] });
  });

  it('names a record that does not parse, and still reports the rest', async () => {
    await createVolume('good', '--backend', 'dir', '--size', '1Mi');
    await createVolume('bad', '--backend', 'dir', '--size', '1Mi');
    writeFileSync(join(s.dataRoot, 'volumes/bad/volume.json'), '{"schema": 4, "id": "bad"');

    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(inventory.problems).toEqual([expect.objectContaining({ kind: 'damaged-record', subject: 'volume bad', detail: expect.stringContaining('is corrupt (not JSON)') })]);
    expect(inventory.volumes.map((v) => v.id)).toEqual(['good']);
  });

  it('finds a lock whose holder is gone and a temporary record file a killed writer left', async () => {
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    // What SIGKILL leaves (shared/store/lock.ts, shared/store/json-record.ts): a lock directory and its owner file
    // naming a process that has exited, and a temporary copy of a record, both older than a live holder's.
    const gone = Number(execFileSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' }).trim());
    const lock = join(s.dataRoot, 'locks/volume-dir.lock');
    mkdirSync(lock, { recursive: true });
    const temp = join(s.dataRoot, 'volumes/dir/volume.json.123456');
    writeFileSync(temp, '{');
    writeFileSync(`${lock}.owner`, JSON.stringify({ pid: gone, start: '1', host: hostname(), ino: statSync(lock).ino }));
    const past = new Date(Date.now() - 60_000);
    for (const p of [lock, temp]) utimesSync(p, past, past);

    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(problems(inventory)).toEqual([`stale-lock ${lock}`, `stale-temp-file ${temp}`]);
  });

  it("finds the work of a killed create, and leaves alone work whose create still holds its lock", async () => {
    await createVolume('dir', '--backend', 'dir', '--size', '1Mi');
    // shared/store/work-area.ts names work <purpose>@<entity>@<id>@<hex>; a create holds the entry's
    // lock throughout, so work with no lock is a killed one's, and work under a fresh lock is live.
    const killed = join(s.dataRoot, '.work/new@volumes@ghost@0123abcd');
    const live = join(s.dataRoot, '.work/new@volumes@busy@89abcdef');
    for (const dir of [killed, live]) mkdirSync(join(dir, 'data'), { recursive: true });
    mkdirSync(join(s.dataRoot, 'locks/volume-busy.lock'), { recursive: true });

    const { exitCode, inventory } = await status();
    expect(exitCode).toBe(1);
    expect(problems(inventory)).toEqual([`abandoned-work ${killed}`]);
    expect(inventory.problems[0]?.detail).toMatch(/a create of volume ghost that was killed/);
    rmSync(join(s.dataRoot, 'locks/volume-busy.lock'), { recursive: true });
    expect(problems((await status()).inventory)).toEqual([`abandoned-work ${live}`, `abandoned-work ${killed}`]);
  });
});
