import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterEach, beforeEach, expect } from 'vitest';
import type { VolumeCapability } from '../../../csi/csi-types.js';
import { type PodView, rebootNode } from '../../helpers/reboot.js';
import { outcome, type Partial2 } from './client.js';
import { MiB, size, stagingPath, targetPath } from './requests.js';
import { createCsiScratch, type CsiScratch } from './scratch.js';
import { launchCsi, type RunningCsi } from './server.js';

/** One pod's use of a volume: its target, read-write unless `readonly` (NodePublishVolume.readonly). */
export interface PodUse {
  pod: string;
  readonly?: boolean;
}

/** A volume as a test plans its use: every pod publishes from the volume's one staging path. */
export interface PlannedVolume {
  id: string;
  backend: 'block' | 'dir';
  cap: Partial2<VolumeCapability>;
  uses: PodUse[];
}

/** The call answered OK; the label names the call and path, so a failure says which. */
export async function expectOk(label: string, call: Promise<unknown>): Promise<void> {
  const o = await outcome(call);
  expect(`${label}: ${o.code} ${o.message}`).toBe(`${label}: OK `);
}

/**
 * The calls kubelet and the CSI sidecars make for planned volumes on node-a, against whichever server
 * is running now (a reboot replaces it), at the paths kubelet uses: the same paths on every call.
 */
export function csiKubelet(s: CsiScratch, server: () => RunningCsi) {
  const ctl = () => server().client;
  const staging = (v: PlannedVolume) => stagingPath(s.kubeletDir, v.id);
  const target = (v: PlannedVolume, use: PodUse) => targetPath(s.kubeletDir, use.pod, v.id);
  const isRaw = (v: PlannedVolume) => Boolean(v.cap.block);
  const k = {
    staging,
    /** Where each pod sees the volume. */
    views: (v: PlannedVolume): PodView[] => v.uses.map((u) => ({ path: target(v, u), raw: isRaw(v), readonly: Boolean(u.readonly) })),
    create: (v: PlannedVolume) =>
      expectOk(`CreateVolume ${v.id}`, ctl().call('Controller', 'CreateVolume', { name: v.id, volume_capabilities: [v.cap], parameters: { backend: v.backend }, capacity_range: size(32 * MiB) })),
    attach: (v: PlannedVolume, node = 'node-a') =>
      expectOk(`ControllerPublishVolume ${v.id} to ${node}`, ctl().call('Controller', 'ControllerPublishVolume', { volume_id: v.id, node_id: node, volume_capability: v.cap })),
    async stage(v: PlannedVolume) {
      // kubelet makes the staging dir and each target's parent; the plugin makes the target itself.
      mkdirSync(staging(v), { recursive: true });
      await expectOk(`NodeStageVolume ${staging(v)}`, ctl().call('Node', 'NodeStageVolume', { volume_id: v.id, staging_target_path: staging(v), volume_capability: v.cap }));
    },
    async publish(v: PlannedVolume) {
      for (const u of v.uses) {
        mkdirSync(dirname(target(v, u)), { recursive: true });
        const request = { volume_id: v.id, staging_target_path: staging(v), target_path: target(v, u), volume_capability: v.cap, readonly: Boolean(u.readonly) };
        await expectOk(`NodePublishVolume ${target(v, u)}`, ctl().call('Node', 'NodePublishVolume', request));
      }
    },
    async unpublish(v: PlannedVolume) {
      for (const u of v.uses) await expectOk(`NodeUnpublishVolume ${target(v, u)}`, ctl().call('Node', 'NodeUnpublishVolume', { volume_id: v.id, target_path: target(v, u) }));
    },
    unstage: (v: PlannedVolume) => expectOk(`NodeUnstageVolume ${staging(v)}`, ctl().call('Node', 'NodeUnstageVolume', { volume_id: v.id, staging_target_path: staging(v) })),
    detach: (v: PlannedVolume, node = 'node-a') =>
      expectOk(`ControllerUnpublishVolume ${v.id} from ${node}`, ctl().call('Controller', 'ControllerUnpublishVolume', { volume_id: v.id, node_id: node })),
    delete: (v: PlannedVolume) => expectOk(`DeleteVolume ${v.id}`, ctl().call('Controller', 'DeleteVolume', { volume_id: v.id })),
    async setUp(v: PlannedVolume) {
      await k.attach(v);
      await k.stage(v);
      await k.publish(v);
    },
    async tearDown(v: PlannedVolume) {
      await k.unpublish(v);
      await k.unstage(v);
      await k.detach(v);
    },
  };
  return k;
}

export interface RebootableCsi {
  scratch(): CsiScratch;
  server(): RunningCsi;
  /** The power goes: the server dies by SIGKILL, the node reboots (rebootNode), a new server starts on the same roots. */
  reboot(): Promise<void>;
}

/** A fresh scratch world and server for every test of a file, stopped and removed after each, even on failure. */
export function useRebootableCsi(): RebootableCsi {
  let s: CsiScratch | undefined;
  let server: RunningCsi | undefined;
  beforeEach(async () => {
    s = createCsiScratch('node-a');
    server = await launchCsi(s);
  });
  afterEach(async () => {
    try {
      await server?.stop();
    } finally {
      s?.cleanup();
    }
  });
  const scratch = () => s ?? fail('no scratch world: used outside a test?');
  const running = () => server ?? fail('no CSI server is running');
  return {
    scratch,
    server: running,
    async reboot() {
      const dying = running();
      server = undefined;
      dying.child.kill('SIGKILL');
      await dying.stop();
      await rebootNode(scratch());
      server = await launchCsi(scratch());
    },
  };
}

function fail(why: string): never {
  throw new Error(why);
}
