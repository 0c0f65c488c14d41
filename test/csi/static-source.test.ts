import { describe, expect, it } from 'vitest';
import { expectCode } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { mountCap } from './helpers/requests.js';

// The rule of shared/static-source.ts from the CSI side: StorageClass parameters are written by
// whoever may create StorageClasses, not by the node's administrator.
const { ctl } = useCsiServer({ nodeId: 'node-a' });

describe('CreateVolume of a static volume with a host-path source', () => {
  it('is INVALID_ARGUMENT outside staticSourceRoots (none are listed by default), and nothing is created', async () => {
    const message = await expectCode(
      ctl('CreateVolume', { name: 'hostroot', volume_capabilities: [mountCap()], parameters: { backend: 'static', source: '/', fsType: 'none', mountOptions: 'bind' } }),
      'INVALID_ARGUMENT',
    );
    expect(message).toBe(
      'static source / is a host path: only an administrator may choose one (twinvol volume create), or list a root that holds it in the staticSourceRoots setting',
    );
    expect((await ctl('ListVolumes', {})).entries).toEqual([]);
  });

  it('a pseudo source such as tmpfs is not a host path and stays allowed', async () => {
    await ctl('CreateVolume', { name: 'scratch', volume_capabilities: [mountCap()], parameters: { backend: 'static', source: 'tmpfs', fsType: 'tmpfs' } });
  });
});
