import { describe, expect, it } from 'vitest';
import { FLEX_VERBS, isFlexVerb } from '../../../flex/verb-names.js';
import { VERBS } from '../../../flex/verbs.js';

/**
 * The argv kubelet sends after each verb (kubelet's pkg/volume/flexvolume), written out as the
 * protocol has it rather than read from flex/verbs.ts.
 */
const KUBELET_ARGV: Record<string, string[]> = {
  getvolumename: ['<json>'],
  attach: ['<json>', '<node>'],
  isattached: ['<json>', '<node>'],
  detach: ['<pvName>', '<node>'],
  waitforattach: ['<device>', '<json>'],
  mountdevice: ['<deviceMountPath>', '<device>', '<json>'],
  unmountdevice: ['<deviceMountPath>'],
  mount: ['<podVolumeDir>', '<json>'],
  unmount: ['<podVolumeDir>'],
  expandvolume: ['<json>', '<deviceMountPath>', '<newSize>', '<oldSize>'],
  expandfs: ['<json>', '<devicePath>', '<mountPath>', '<newSize>', '<oldSize>'],
};

describe('FlexVolume argv: the verbs the executable answers, and how many arguments each takes', () => {
  it('every kubelet verb but init is handled, and nothing else', () => {
    expect([...FLEX_VERBS].sort()).toEqual(Object.keys(KUBELET_ARGV).sort());
    expect(Object.keys(VERBS).sort()).toEqual(Object.keys(KUBELET_ARGV).sort());
  });

  it.each(Object.entries(KUBELET_ARGV))('%s takes exactly the arguments kubelet sends, and its usage says which', (verb, argv) => {
    const spec = VERBS[verb as keyof typeof VERBS];
    expect(spec.arity).toBe(argv.length);
    expect(spec.usage).toBe([verb, ...argv].join(' '));
  });

  it.each([['init'], ['volume'], [''], ['Attach'], ['mount '], ['help'], ['--help'], ['__proto__'], ['constructor'], ['toString'], ['hasOwnProperty']])(
    '%j is not a verb the dispatcher loads for (init and volume are answered before it; the rest is Not supported)',
    (word) => {
      expect(isFlexVerb(word)).toBe(false);
    },
  );
});
