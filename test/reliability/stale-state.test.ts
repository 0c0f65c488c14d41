import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findLoopDevice } from '../../shared/loop-devices.js';
import { mountAt } from '../../shared/mountinfo.js';
import { SCHEMA_VERSION } from '../../shared/store/json-record.js';
import { NodeState, pathKey } from '../../shared/store/node-state.js';
import { expectCode, type Partial2 } from '../csi/helpers/client.js';
import { MiB, mountCap, size, stagingPath, targetPath } from '../csi/helpers/requests.js';
import type { VolumeCapability } from '../../csi/csi-types.js';
import { useCsiWorld, type World } from '../helpers/csi-world.js';
import { expectSuccess, mountOptions, podNamed, runAdmin } from '../helpers/flex-runner.js';
import { podVolumeDir } from '../helpers/kubelet-paths.js';
import { expectNodeClean } from '../helpers/reboot.js';

// Stale and foreign state met through the front ends (issue 8, suite 6): what a killed writer,
// damage, an older twinvol or a vanished device leaves for the next call. A record's temporary
// file (shared/store/json-record.ts writeRecord) beside it is never read as one and goes with the record's next write; a
// truncated or garbage record is refused, naming the file and what to do, never trusted; a record of
// an older schema is read as it is (shared/store/json-record.ts: versions 1 to 3 parse as they are);
// a staging whose loop device and image are gone is not published from, and unstages cleanly.
// Covered elsewhere: teardown of a target or staging someone else mounted (FlexVolume in
// test/shared/foreign-teardown.test.ts, CSI in test/csi/node.test.ts) and a FlexVolume mount onto one
// (test/flex/protocol-mounts.test.ts): here only CSI's NodePublishVolume onto one. A lock whose holder
// died: taken over at once in test/shared/lock.test.ts (a SIGKILLed holder, a reused pid), and through
// both front ends by the crash suites, which kill them inside a call and retry
// (test/reliability/flex-crash-anywhere.test.ts, csi-crash-anywhere.test.ts). Through a front end
// here it could not fail: a call waits 90 s for a lock, and the stale rule takes it over in 10 s.

const world = useCsiWorld();
const cap = mountCap();

/** A volume made and published to node-a, its staging dir made as kubelet makes it. */
async function ready(w: World, id: string, backend: 'dir' | 'block' = 'dir', c: Partial2<VolumeCapability> = cap): Promise<void> {
  await w.ctl('CreateVolume', { name: id, volume_capabilities: [c], parameters: { backend }, capacity_range: size(32 * MiB) });
  await w.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: c });
  mkdirSync(stagingPath(w.s.kubeletDir, id), { recursive: true });
}
const stage = (w: World, id: string) => w.node('NodeStageVolume', { volume_id: id, staging_target_path: stagingPath(w.s.kubeletDir, id), volume_capability: cap });
const unstage = (w: World, id: string) => w.node('NodeUnstageVolume', { volume_id: id, staging_target_path: stagingPath(w.s.kubeletDir, id) });
function publish(w: World, id: string, pod: string) {
  const target = targetPath(w.s.kubeletDir, pod, id);
  mkdirSync(dirname(target), { recursive: true });
  return w.node('NodePublishVolume', { volume_id: id, staging_target_path: stagingPath(w.s.kubeletDir, id), target_path: target, volume_capability: cap });
}
const unpublish = (w: World, id: string, pod: string) => w.node('NodeUnpublishVolume', { volume_id: id, target_path: targetPath(w.s.kubeletDir, pod, id) });

const volumeRecord = (w: World, id: string) => join(w.s.dataRoot, 'volumes', id, 'volume.json');
const mountRecord = (w: World, id: string, path: string) => join(w.s.stateDir, 'mounts', `${id}@${pathKey(path)}.json`);
/** What write-file-atomic names its temporary file: `<record>.<uint32 in decimal>` (node_modules/write-file-atomic/lib/index.js getTmpname). */
const tempOf = (record: string) => `${record}.1158888644`;
/** What a writer killed half way leaves in it: the start of a record. */
const halfWritten = (record: string) => readFileSync(record, 'utf8').slice(0, 40);
const REPAIR = /; twinvol writes its records whole, so something else changed this one: restore it from a backup, or move it aside if what it describes is gone$/;

describe('a temporary file of a record write, beside the record', () => {
  it('is never read as a record, and goes with the next write of its record', async () => {
    const w = await world();
    await w.ctl('CreateVolume', { name: 't', volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB) });
    const volume = volumeRecord(w, 't');
    writeFileSync(tempOf(volume), halfWritten(volume));
    const nodeRecord = join(w.s.dataRoot, 'nodes/node-a.json');
    writeFileSync(tempOf(nodeRecord), halfWritten(nodeRecord));
    expect((await w.ctl('ListVolumes', {})).entries.map((e) => e.volume.volume_id)).toEqual(['t']);
    const nodes = await runAdmin(w.s.env, ['node', 'list']);
    expect(nodes.stdout.split('\n').filter((l) => l.includes('node-a'))).toHaveLength(1);

    // ControllerPublishVolume writes the volume record under its lock: the dead writer's file goes.
    await w.ctl('ControllerPublishVolume', { volume_id: 't', node_id: 'node-a', volume_capability: cap });
    expect(readdirSync(dirname(volume)).sort()).toEqual(['data', 'volume.json']);
    mkdirSync(stagingPath(w.s.kubeletDir, 't'), { recursive: true });
    await stage(w, 't');
    const record = mountRecord(w, 't', stagingPath(w.s.kubeletDir, 't'));
    writeFileSync(tempOf(record), halfWritten(record));
    await publish(w, 't', 'pod-1');
    expect(await new NodeState(w.s.stateDir).listAll()).toHaveLength(2);
    await unpublish(w, 't', 'pod-1');
    await unstage(w, 't');
    // The stage record went, and its temporary file with it; a PV or node record's stays, never read.
    expect(readdirSync(join(w.s.stateDir, 'mounts'))).toEqual([]);
    expect(readdirSync(join(w.s.dataRoot, 'nodes')).sort()).toEqual(['node-a.json', 'node-a.json.1158888644']);
    await expectNodeClean(w.s);
  });
});

describe('a truncated or garbage record', () => {
  it('is refused by both front ends, naming the file and what to do; nothing acts on it; the volume works once it is restored', async () => {
    const w = await world();
    await ready(w, 'g');
    await stage(w, 'g');
    await publish(w, 'g', 'pod-1');
    const volume = volumeRecord(w, 'g');
    const staging = stagingPath(w.s.kubeletDir, 'g');
    const target = targetPath(w.s.kubeletDir, 'pod-1', 'g');
    const records = { volume, mount: mountRecord(w, 'g', target) };
    const kept = { volume: readFileSync(volume, 'utf8'), mount: readFileSync(records.mount, 'utf8') };
    const damage: Record<string, (text: string) => string> = {
      truncated: (text) => text.slice(0, text.length / 2),
      garbage: () => '\0\0\0\0 not a record',
      'of another shape': (text) => text.replace('"backend"', '"backnd"').replace('"kind"', '"knd"'),
    };
    for (const [how, damaged] of Object.entries(damage)) {
      for (const path of Object.values(records)) writeFileSync(path, damaged(readFileSync(path, 'utf8')));
      const named = (path: string) => new RegExp(`^state record ${path} (is corrupt \\(not JSON\\)|does not parse: .*)${REPAIR.source}`);
      expect(await expectCode(w.ctl('ControllerGetVolume', { volume_id: 'g' }), 'INTERNAL'), how).toMatch(named(volume));
      expect(await expectCode(publish(w, 'g', 'pod-2'), 'INTERNAL'), how).toMatch(named(volume));
      expect(await expectCode(unpublish(w, 'g', 'pod-1'), 'INTERNAL'), how).toMatch(named(records.mount));
      const r = await w.flex('mount', podVolumeDir(w.s.kubeletDir, 'uid-3', 'pv-g'), mountOptions('pv-g', podNamed('uid-3'), { volumeId: 'g' }));
      expect(r.reply, how).toEqual({ status: 'Failure', message: expect.stringMatching(named(volume)) });
      // Refused, not repaired: the damaged files are as they were, the mounts where they were.
      expect(mountAt(target)?.mountPoint, how).toBe(target);
      // (A dir volume's staging is its record alone.)
      expect(existsSync(mountRecord(w, 'g', staging)), how).toBe(true);
      expect(mountAt(targetPath(w.s.kubeletDir, 'pod-2', 'g')), how).toBeUndefined();
      writeFileSync(volume, kept.volume);
      writeFileSync(records.mount, kept.mount);
    }
    await unpublish(w, 'g', 'pod-1');
    await unstage(w, 'g');
    await expectNodeClean(w.s);
  });
});

describe('a record of another schema version', () => {
  it('an older one is read as it is and used by both front ends; a newer one is refused, saying so', async () => {
    const w = await world();
    await ready(w, 'old');
    const volume = volumeRecord(w, 'old');
    // A version 1 volume record: no name, access requests or topology, attachments without marks.
    const current = JSON.parse(readFileSync(volume, 'utf8')) as Record<string, unknown>;
    const { accessRequests: _, topology: __, ...v1 }: Record<string, unknown> = { ...current, schema: 1 };
    writeFileSync(volume, `${JSON.stringify(v1, null, 2)}\n`);
    await stage(w, 'old');
    const record = mountRecord(w, 'old', stagingPath(w.s.kubeletDir, 'old'));
    writeFileSync(record, readFileSync(record, 'utf8').replace(`"schema": ${SCHEMA_VERSION}`, '"schema": 2'));
    await publish(w, 'old', 'pod-1');
    const flexDir = podVolumeDir(w.s.kubeletDir, 'uid-2', 'pv-old');
    expectSuccess(await w.flex('mount', flexDir, mountOptions('pv-old', podNamed('uid-2'), { volumeId: 'old' })));
    expectSuccess(await w.flex('unmount', flexDir));
    await unpublish(w, 'old', 'pod-1');
    await unstage(w, 'old');
    await w.ctl('ControllerUnpublishVolume', { volume_id: 'old', node_id: 'node-a' });
    expect(JSON.parse(readFileSync(volume, 'utf8'))).toMatchObject({ id: 'old', attachments: [] });
    await expectNodeClean(w.s);

    writeFileSync(volume, JSON.stringify({ ...current, schema: SCHEMA_VERSION + 1 }));
    const message = await expectCode(w.ctl('ControllerPublishVolume', { volume_id: 'old', node_id: 'node-a', volume_capability: cap }), 'INTERNAL');
    expect(message).toBe(`state record ${volume} was written by a newer twinvol (schema ${SCHEMA_VERSION + 1}); run that version of twinvol, or a newer one, here`);
  });
});

describe('a staging whose loop device and image are gone', () => {
  it('is not published from, by either front end, with a message that says why; its pods and the staging tear down', async () => {
    const w = await world();
    await ready(w, 'lost', 'block');
    await stage(w, 'lost');
    await publish(w, 'lost', 'pod-1');
    const image = join(w.s.dataRoot, 'volumes/lost/image.img');
    const device = findLoopDevice(image);
    expect(device).toMatch(/^\/dev\/loop\d+$/);
    // The image deleted under the mounted device, the device detached lazily (it clears with the last unmount).
    rmSync(image);
    spawnSync('losetup', ['-d', String(device)]);
    const gone = /^the backing image of volume lost is missing: not publishing it, since what a pod wrote there would be lost; unstage it, then /;
    expect(await expectCode(publish(w, 'lost', 'pod-2'), 'FAILED_PRECONDITION')).toMatch(gone);
    expect(mountAt(targetPath(w.s.kubeletDir, 'pod-2', 'lost'))).toBeUndefined();
    const flexDir = podVolumeDir(w.s.kubeletDir, 'uid-3', 'pv-lost');
    const r = await w.flex('mount', flexDir, mountOptions('pv-lost', podNamed('uid-3'), { volumeId: 'lost' }));
    expect(r.reply).toEqual({ status: 'Failure', message: expect.stringMatching(gone) });
    expect(mountAt(flexDir)).toBeUndefined();

    await unpublish(w, 'lost', 'pod-1');
    await unstage(w, 'lost');
    await w.ctl('ControllerUnpublishVolume', { volume_id: 'lost', node_id: 'node-a' });
    await expectNodeClean(w.s);
  });
});

describe('foreign state a front end meets', () => {
  it('NodePublishVolume onto a target someone else mounted is ALREADY_EXISTS naming the mount, which stays', async () => {
    const w = await world();
    await ready(w, 'f');
    await stage(w, 'f');
    const target = targetPath(w.s.kubeletDir, 'pod-1', 'f');
    mkdirSync(target, { recursive: true });
    spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'someone-else', target]);
    expect(await expectCode(publish(w, 'f', 'pod-1'), 'ALREADY_EXISTS')).toBe(`${target} already holds a mount twinvol did not make: someone-else (tmpfs) at ${target}`);
    expect(mountAt(target)?.source).toBe('someone-else');
    await unstage(w, 'f');
  });

});
