import { execFileSync } from 'node:child_process';
import { statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { registerNode } from '../../shared/core/nodes.js';
import { readMounts } from '../../shared/mountinfo.js';
import { nodeSegments } from '../../shared/topology.js';
import { nid, vid } from '../helpers/ids.js';
import { expectCode } from '../csi/helpers/client.js';
import { mountCap, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { coreIn } from '../shared/core-scratch.js';
import { type ExecSuite, useExecServer } from './helpers.js';

/**
 * Exec volumes under the core's rules (shared/core/attachments.ts, staging.ts, publishing.ts): the
 * CSI server calls the same verbs for them as for its own volumes, so attachments, fences, mount
 * records, delete-while-attached and kubelet's fsGroup rule hold for a third-party driver's volume
 * too. Every step here goes through the real server and a real driver (test/exec/drivers/).
 */
const csi = useExecServer();
const mountsAt = (path: string) => readMounts().filter((m) => m.mountPoint === path).length;
const core = () => coreIn(csi.s);
const records = async (id: string) => (await core().nodeState.listForVolume(vid(id))).map((r) => `${r.kind} ${r.path}`).sort();
const attachments = async (id: string) => (await core().catalog.getVolume(vid(id)))?.attachments ?? [];
const verbs = (suite: ExecSuite, driver: 'loop' | 'tmpfs') => suite.calls(driver).map((c) => c[0]);

/** A loop image for the attachable driver, and the volume context of a static PV naming it. */
function loopVolume(id: string) {
  const image = join(csi.s.root, `${id}.img`);
  writeFileSync(image, '');
  truncateSync(image, 32 * 2 ** 20);
  return { backend: 'exec', driver: 'acme/loop', fsType: 'ext4', image };
}

describe('exec volumes under the core\'s rules', () => {
  it('an attachable driver\'s volume: one node at a time, no stage before attach, records per mount, no delete while attached', async () => {
    const id = 'rules-loop';
    const ctx = loopVolume(id);
    const cap = mountCap('ext4');
    await registerNode(core(), nid('node-b'), nodeSegments('node-b'), 'csi');
    const staging = stagingPath(csi.s.kubeletDir, id);
    // Node-side work follows the attach step, for exec volumes too (requireAttachedTo).
    expect(await expectCode(csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap, volume_context: ctx }), 'FAILED_PRECONDITION')).toContain('not attached to node node-a');
    const pub = await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap, volume_context: ctx });
    expect((await attachments(id)).map((a) => a.node)).toEqual(['node-a']);
    // A single-node volume held by node-a is refused to node-b, naming the holder; its driver is not asked.
    const attachCalls = verbs(csi, 'loop').filter((v) => v === 'attach').length;
    expect(await expectCode(csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-b', volume_capability: cap, volume_context: ctx }), 'FAILED_PRECONDITION')).toContain('attached to node node-a');
    expect(verbs(csi, 'loop').filter((v) => v === 'attach')).toHaveLength(attachCalls);
    await csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: cap, volume_context: ctx });
    const target = targetPath(csi.s.kubeletDir, 'uid-rules', id);
    await csi.node('NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: cap, volume_context: ctx });
    expect(await records(id)).toEqual([`publish ${target}`, `stage ${staging}`]);
    expect(await expectCode(csi.ctl('DeleteVolume', { volume_id: id }), 'FAILED_PRECONDITION')).toContain('still attached to node node-a');
    // Unstage while a pod still has it: refused, as for any volume.
    expect(await expectCode(csi.node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging }), 'FAILED_PRECONDITION')).toContain('still published');
    await csi.node('NodeUnpublishVolume', { volume_id: id, target_path: target });

    // Detached while still staged: a fence keeps node-b out, and the driver's detach waits for the unstage.
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    expect(await attachments(id)).toMatchObject([{ node: 'node-a', fenced: true }]);
    expect(verbs(csi, 'loop')).not.toContain('detach');
    await expectCode(csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-b', volume_capability: cap, volume_context: ctx }), 'FAILED_PRECONDITION');
    await csi.node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    expect(mountsAt(staging)).toBe(0);
    expect(await attachments(id)).toEqual([]);
    expect(await records(id)).toEqual([]);
    expect(verbs(csi, 'loop').slice(-2)).toEqual(['unmountdevice', 'detach']);
    await csi.ctl('DeleteVolume', { volume_id: id });
  });

  it('a non-attachable driver\'s volume mounted without a staging: an implicit attachment for as long as a pod has it', async () => {
    const id = 'rules-tmpfs';
    const ctx = { backend: 'exec', driver: 'acme/tmpfs' };
    const targets = ['uid-t1', 'uid-t2'].map((uid) => targetPath(csi.s.kubeletDir, uid, id));
    for (const target of targets) await csi.node('NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: ctx });
    expect(targets.map(mountsAt)).toEqual([1, 1]);
    expect(await records(id)).toEqual(targets.map((t) => `publish ${t}`).sort());
    expect(await attachments(id)).toMatchObject([{ node: 'node-a', implicit: true }]);
    expect(await expectCode(csi.ctl('DeleteVolume', { volume_id: id }), 'FAILED_PRECONDITION')).toContain('still attached');
    await csi.node('NodeUnpublishVolume', { volume_id: id, target_path: targets[0] ?? '' });
    expect(await attachments(id)).toHaveLength(1);
    await csi.node('NodeUnpublishVolume', { volume_id: id, target_path: targets[1] ?? '' });
    expect(await attachments(id)).toEqual([]);
    await csi.ctl('DeleteVolume', { volume_id: id });
  });
});

describe("a static PV's attributes, sent with every call", () => {
  it('are taken afresh while nothing holds the volume, and refused, naming what differs, while something does', async () => {
    const id = 'rules-described';
    const target = targetPath(csi.s.kubeletDir, 'uid-d', id);
    const publishWith = (ctx: Record<string, string>) => csi.node('NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: ctx });
    // A typo in the PV: its first publish fails, but it described the volume.
    expect(await expectCode(publishWith({ backend: 'exec', driver: 'acme/absent', share: 'a' }), 'FAILED_PRECONDITION')).toContain('acme~absent/absent');
    expect((await core().catalog.getVolume(vid(id)))?.parameters).toMatchObject({ driver: 'acme/absent' });
    // The PV made again, right: its description is the one used, not the first call's.
    await publishWith({ backend: 'exec', driver: 'acme/tmpfs', share: 'b' });
    expect(mountsAt(target)).toBe(1);
    const mount = csi.calls('tmpfs').find((c) => c[0] === 'mount' && c[1] === target);
    expect(JSON.parse(mount?.[2] ?? '{}')).toMatchObject({ share: 'b' });
    // While it is published from that description, another is refused, and the record stays.
    const refused = await expectCode(publishWith({ backend: 'exec', driver: 'acme/tmpfs', share: 'c', extra: 'x' }), 'FAILED_PRECONDITION');
    expect(refused).toContain(`volume ${id} is in use (attached to node node-a; published at ${target})`);
    expect(refused).toContain('(extra added, share changed)');
    expect(refused).not.toContain('"c"');
    expect((await core().catalog.getVolume(vid(id)))?.parameters).toMatchObject({ driver: 'acme/tmpfs', share: 'b' });
    // The same description again is the same publish; teardown, which carries none, uses the record.
    await publishWith({ backend: 'exec', driver: 'acme/tmpfs', share: 'b' });
    await csi.node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    expect(mountsAt(target)).toBe(0);
    expect(csi.calls('tmpfs').filter((c) => c[1] === target).map((c) => c[0])).toEqual(['mount', 'unmount']);
  });
});

describe('fsGroup after an exec publish, as kubelet\'s flexvolume mounter.go', () => {
  const gidAt = (path: string) => statSync(path).gid;

  it('applied after the driver\'s mount when its init leaves fsGroup on (the default), not when it says false', async () => {
    const cap = mountCap('', 'SINGLE_NODE_WRITER', { volume_mount_group: '4321' });
    const on = targetPath(csi.s.kubeletDir, 'uid-g1', 'group-on');
    const off = targetPath(csi.s.kubeletDir, 'uid-g2', 'group-off');
    await csi.node('NodePublishVolume', { volume_id: 'group-on', target_path: on, volume_capability: cap, volume_context: { backend: 'exec', driver: 'acme/tmpfs' } });
    await csi.node('NodePublishVolume', { volume_id: 'group-off', target_path: off, volume_capability: cap, volume_context: { backend: 'exec', driver: 'acme/nofsgroup' } });
    expect(gidAt(on)).toBe(4321);
    expect(gidAt(off)).toBe(0);
    // The intent is recorded (a retry after a crash finishes the walk) only where it applies.
    const recs = await core().nodeState.listForVolume(vid('group-on'));
    expect(recs).toMatchObject([{ fsGroup: 4321, fsGroupApplied: 4321 }]);
    expect((await core().nodeState.listForVolume(vid('group-off')))[0]?.fsGroup).toBeUndefined();
    for (const [id, t] of [['group-on', on], ['group-off', off]] as const) await csi.node('NodeUnpublishVolume', { volume_id: id, target_path: t });
  });
});

describe('isattached answers what the CO asks is attached', () => {
  it('ControllerGetVolume and ListVolumes drop a node whose driver says the volume is no longer attached there', async () => {
    const id = 'rules-isattached';
    const ctx = loopVolume(id);
    const pub = await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap('ext4'), volume_context: ctx });
    const published = async () => (await csi.ctl('ControllerGetVolume', { volume_id: id })).status.published_node_ids;
    const listed = async () => (await csi.ctl('ListVolumes', {})).entries.find((e) => e.volume.volume_id === id)?.status.published_node_ids;
    expect(await published()).toEqual(['node-a']);
    expect(await listed()).toEqual(['node-a']);
    // The device goes behind twinvol's back: the driver's isattached now says false.
    execFileSync('losetup', ['-d', pub.publish_context.device ?? '']);
    expect(await published()).toEqual([]);
    expect(await listed()).toEqual([]);
    expect(csi.calls('loop').filter((c) => c[0] === 'isattached' && c[2] === 'node-a').length).toBeGreaterThanOrEqual(4);
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    await csi.ctl('DeleteVolume', { volume_id: id });
  });
});
