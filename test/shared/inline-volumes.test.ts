// The end of a pod-lifetime (CSI inline) volume, decided in the core under the volume's node lock
// (shared/core/inline-volumes.ts). The CSI calls that reach it are in test/csi/node-ephemeral.test.ts.
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Core } from '../../shared/core/core.js';
import { endInlineIfUnmounted, INLINE_PARAMETER } from '../../shared/core/inline-volumes.js';
import { createVolume, type CreateVolumeSpec } from '../../shared/core/volumes.js';
import type { Scratch } from '../helpers/scratch.js';
import { vid } from '../helpers/ids.js';
import { useScratchCore } from './core-scratch.js';

let s: Scratch;
let core: Core;
useScratchCore((scratch, c) => {
  s = scratch;
  core = c;
});

const inline = (id: string, extra: Partial<CreateVolumeSpec> = {}): CreateVolumeSpec => ({
  id,
  backend: 'dir',
  capacityBytes: 2 ** 20,
  createdBy: 'csi',
  lifetime: 'pod',
  parameters: { [INLINE_PARAMETER]: 'true' },
  ...extra,
});
const exists = (id: string) => existsSync(core.catalog.volumeDir(id));

describe('endInlineIfUnmounted', () => {
  it('deletes an unmounted pod-lifetime volume, by its mark or (schema 6) its parameter alone', async () => {
    await createVolume(core, inline('by-mark', { parameters: {} }));
    await createVolume(core, inline('by-parameter', { lifetime: undefined }));
    expect(await endInlineIfUnmounted(core, vid('by-mark'))).toBe(true);
    expect(await endInlineIfUnmounted(core, vid('by-parameter'))).toBe(true);
    expect([exists('by-mark'), exists('by-parameter')]).toEqual([false, false]);
    // Repeated, and for an id never made: nothing to do.
    expect(await endInlineIfUnmounted(core, vid('by-mark'))).toBe(false);
    expect(await endInlineIfUnmounted(core, vid('never'))).toBe(false);
  });

  it('leaves a provisioned volume alone', async () => {
    await createVolume(core, inline('pv', { lifetime: undefined, parameters: {} }));
    expect(await endInlineIfUnmounted(core, vid('pv'))).toBe(false);
    expect(exists('pv')).toBe(true);
  });

  it('waits for a publish holding the node lock, and keeps the volume it mounted', async () => {
    // Before the check was under the lock, it ran between a racing publish's create and its mount
    // and deleted the volume the pod was about to use.
    await createVolume(core, inline('raced'));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const publishing = core.nodeState.lockVolume('raced', () => gate);
    const ending = endInlineIfUnmounted(core, vid('raced'));
    // Long enough for a check that did not wait to have finished; it must still be waiting.
    expect(await Promise.race([ending.then(() => 'ended'), sleep(300).then(() => 'waiting')])).toBe('waiting');
    await core.nodeState.put({ schema: 7, volumeId: vid('raced'), path: `${s.kubeletDir}/pods/p/volumes/x/mount`, kind: 'publish', readonly: false, createdAt: new Date().toISOString() });
    release();
    await publishing;
    expect(await ending).toBe(false);
    expect(exists('raced')).toBe(true);
  });
});
