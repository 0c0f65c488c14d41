// ControllerExpandVolume of the built-in backends, apart from test/csi/controller.test.ts so that
// neither passes 400 lines. The size rule itself is shared/size.ts sizeInRange.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { repeatedOk } from './helpers/repeat.js';
import { GiB, MiB, mountCap, size } from './helpers/requests.js';

const csi = useCsiServer({ nodeId: 'node-a' });
const { ctl } = csi;

const dirVolume = (name: string) => ctl('CreateVolume', { name, volume_capabilities: [mountCap()], parameters: { backend: 'dir' }, capacity_range: size(64 * MiB) });

describe('ControllerExpandVolume', () => {
  it('requires id and capacity; unknown volume is NOT_FOUND', async () => {
    await expectCode(ctl('ControllerExpandVolume', { capacity_range: size(GiB) }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerExpandVolume', { volume_id: 'exp-none' }), 'INVALID_ARGUMENT');
    await expectCode(ctl('ControllerExpandVolume', { volume_id: 'exp-none', capacity_range: size(GiB) }), 'NOT_FOUND');
  });

  it('grows a block image, asks for the node step, never shrinks, and answers repeats the same', async () => {
    await ctl('CreateVolume', { name: 'exp', volume_capabilities: [mountCap()], capacity_range: size(64 * MiB) });
    const r = await repeatedOk('ControllerExpandVolume', () => ctl('ControllerExpandVolume', { volume_id: 'exp', capacity_range: size(96 * MiB) }));
    expect(r).toEqual({ capacity_bytes: String(96 * MiB), node_expansion_required: true });
    expect(statSync(join(csi.s.dataRoot, 'volumes/exp/image.img')).size).toBe(96 * MiB);
    const smaller = await ctl('ControllerExpandVolume', { volume_id: 'exp', capacity_range: size(32 * MiB) });
    expect(smaller.capacity_bytes).toBe(String(96 * MiB));
    expect(await expectCode(ctl('ControllerExpandVolume', { volume_id: 'exp', capacity_range: size(2 ** 51) }), 'OUT_OF_RANGE')).toContain('1 PiB');
  });

  it('rounds a block expansion up to whole MiB within limit_bytes, else OUT_OF_RANGE', async () => {
    await ctl('CreateVolume', { name: 'exp-lim', volume_capabilities: [mountCap()], capacity_range: size(64 * MiB) });
    const range = (required: number, limit: number) => ({ required_bytes: String(required), limit_bytes: String(limit) });
    expect((await ctl('ControllerExpandVolume', { volume_id: 'exp-lim', capacity_range: range(80 * MiB + 1, 90 * MiB) })).capacity_bytes).toBe(String(81 * MiB));
    await expectCode(ctl('ControllerExpandVolume', { volume_id: 'exp-lim', capacity_range: range(90 * MiB + 1, 90 * MiB + 10) }), 'OUT_OF_RANGE');
    expect(await expectCode(ctl('ControllerExpandVolume', { volume_id: 'exp-lim', capacity_range: range(0, 90 * MiB) }), 'INVALID_ARGUMENT')).toContain('required_bytes');
    expect(statSync(join(csi.s.dataRoot, 'volumes/exp-lim/image.img')).size).toBe(81 * MiB);
  });

  it('records a dir volume\'s new size without a node step', async () => {
    await dirVolume('exp-dir');
    expect(await ctl('ControllerExpandVolume', { volume_id: 'exp-dir', capacity_range: size(128 * MiB) })).toEqual({
      capacity_bytes: String(128 * MiB),
      node_expansion_required: false,
    });
  });
});
