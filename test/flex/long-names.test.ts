import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { flexOptions, flexSession, reconstructedOptions } from '../helpers/flex-runner.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { createScratch, loopsLeftUnder, type Scratch } from '../helpers/scratch.js';

// Kubernetes allows PV names of 253 characters; a record file named after one ran into the 255-byte
// file name limit and failed with a raw ENAMETOOLONG (issue 8, defect 7).
let s: Scratch;
beforeEach(() => {
  s = createScratch('node-a');
});
afterEach(() => s.cleanup());

const { ok, createVolume } = flexSession(() => s.env);
const pv = `pv-${'a'.repeat(240)}.${'b'.repeat(9)}`;

describe('a PV name of 253 characters', () => {
  it('goes through attach, mountdevice, a kubelet restart, unmountdevice and detach', async () => {
    expect(pv).toHaveLength(253);
    await createVolume('vol-long', '--size', '16Mi');
    const opts = flexOptions(pv, { volumeId: 'vol-long' });
    await ok('attach', opts, 'node-a');
    const { reply } = await ok('waitforattach', '', opts);
    const global = deviceMountPath(s.kubeletDir, pv.slice(0, 200));
    await ok('mountdevice', global, String(reply.device), opts);
    // After a restart kubelet knows only the PV name: it must still lead to the volume.
    expect((await ok('getvolumename', reconstructedOptions(pv))).reply).toEqual({ status: 'Success', volumeName: 'vol-long' });
    await ok('unmountdevice', global);
    await ok('detach', pv, 'node-a');
    expect(await loopsLeftUnder(s.root)).toEqual([]);
  });
});
