import { describe, expect, it } from 'vitest';
import { parseOptions } from '../../../flex/options.js';
import { goJson } from '../../helpers/go-json.js';
import { expectThrows } from '../../shared/expect-error.js';

/** What options that ask for no creation say of one: the defaults. */
const NO_CREATE = { wanted: false, backend: 'block', capacityBytes: 0, access: 'single-node' };

/** kubelet's own keys on every call (kubelet's pkg/volume/flexvolume adds them), plus `extra`. */
const kubelet = (extra: Record<string, string> = {}) =>
  goJson({ 'kubernetes.io/fsType': '', 'kubernetes.io/pvOrVolumeName': 'pv-1', 'kubernetes.io/readwrite': 'rw', ...extra });

describe('FlexVolume options: one JSON object of strings, as kubelet\'s Go encoder writes it', () => {
  it('reads the volume id, the PV name and the access kubelet asks for', () => {
    expect(parseOptions(kubelet({ volumeId: 'vol-1' }))).toEqual({
      raw: { 'kubernetes.io/fsType': '', 'kubernetes.io/pvOrVolumeName': 'pv-1', 'kubernetes.io/readwrite': 'rw', volumeId: 'vol-1' },
      volumeId: 'vol-1',
      pvName: 'pv-1',
      readonly: false,
      secretKeys: [],
      create: NO_CREATE,
    });
  });

  it('Go\'s escapes of <, > and & decode to the characters', () => {
    expect(parseOptions(goJson({ 'kubernetes.io/pod.name': 'a<b>&c' })).raw['kubernetes.io/pod.name']).toBe('a<b>&c');
  });

  it('every kubelet key (kubernetes.io/...) is accepted, known or not', () => {
    expect(parseOptions(kubelet({ 'kubernetes.io/pod.uid': 'u', 'kubernetes.io/some.future.key': 'x' })).pvName).toBe('pv-1');
  });

  it('a call without a PV name or volume id leaves both unset', () => {
    expect(parseOptions('{}')).toEqual({ raw: {}, readonly: false, secretKeys: [], create: NO_CREATE });
  });
});

describe('FlexVolume options: the PV\'s own keys', () => {
  it.each([['volumeId', 'v'], ['createIfMissing', 'true'], ['size', '1Gi'], ['backend', 'dir'], ['fsType', 'x'], ['readOnly', 'true'], ['access', 'multi-node'], ['source', 'x'], ['mountOptions', 'x']])(
    '%s is a key twinvol reads',
    (key, value) => {
      expect(() => parseOptions(goJson({ [key]: value }))).not.toThrow();
    },
  );

  it('what a creation would use is read with the rest: a bad value is refused whether or not the volume exists', () => {
    expect(parseOptions(goJson({ createIfMissing: 'true', size: '16Mi', backend: 'dir', access: 'multi-node' })).create).toEqual({ wanted: true, backend: 'dir', capacityBytes: 16 * 2 ** 20, access: 'multi-node' });
    expectThrows(() => parseOptions(goJson({ volumeId: 'v', size: 'notasize' })), 'InvalidArgument', 'notasize');
    expectThrows(() => parseOptions(goJson({ volumeId: 'v', access: 'bogus' })), 'InvalidArgument', 'access must be');
    expectThrows(() => parseOptions(goJson({ volumeId: 'v', createIfMissing: 'maybe' })), 'InvalidArgument', 'createIfMissing');
  });

  it('backend exec is refused: a FlexVolume driver\'s volume is twinvol-csi\'s to serve', () => {
    expectThrows(() => parseOptions(goJson({ volumeId: 'v', createIfMissing: 'true', size: '1Mi', backend: 'exec' })), 'InvalidArgument', 'option backend "exec"');
  });

  it.each([['volumeID'], ['VolumeId'], ['readonly'], ['pool'], ['kubernetes.iox/fsType']])('%s is refused, naming the key and the keys twinvol reads', (key) => {
    expectThrows(() => parseOptions(goJson({ [key]: 'x' })), 'InvalidArgument', `unknown option "${key}" (twinvol reads: volumeId, createIfMissing, size,`);
  });

  it('a hostile unknown key is quoted clipped to 64 characters', () => {
    const err = expectThrows(() => parseOptions(goJson({ ['q'.repeat(3000)]: 'x' })), 'InvalidArgument');
    expect(err.message).not.toContain('q'.repeat(65));
  });

  it.each([
    ['a path', '../etc'],
    ['a slash', 'a/b'],
    ['empty', ''],
    ['129 bytes', 'x'.repeat(129)],
  ])('volumeId that is %s is refused as an id', (_, id) => {
    expectThrows(() => parseOptions(goJson({ volumeId: id })), 'InvalidArgument', 'option volumeId');
  });

  it('an invalid PV name is refused, naming kubelet\'s key', () => {
    expectThrows(() => parseOptions(goJson({ 'kubernetes.io/pvOrVolumeName': 'a/../b' })), 'InvalidArgument', 'kubernetes.io/pvOrVolumeName');
  });
});

describe('FlexVolume options: read-only is kubelet\'s "ro" or the PV\'s readOnly', () => {
  it.each([
    ['rw', undefined, false],
    ['ro', undefined, true],
    ['rw', 'true', true],
    ['ro', 'false', true],
    ['rw', 'false', false],
    [undefined, undefined, false],
  ])('readwrite %s, readOnly %s: read-only %s', (readwrite, readOnly, expected) => {
    const o: Record<string, string> = {};
    if (readwrite) o['kubernetes.io/readwrite'] = readwrite;
    if (readOnly) o.readOnly = readOnly;
    expect(parseOptions(goJson(o)).readonly).toBe(expected);
  });

  it('anything but ro or rw from kubelet is refused', () => {
    expectThrows(() => parseOptions(goJson({ 'kubernetes.io/readwrite': 'RO' })), 'InvalidArgument', 'kubernetes.io/readwrite must be "ro" or "rw"');
  });

  it('readOnly must be "true" or "false"', () => {
    expectThrows(() => parseOptions(goJson({ readOnly: 'yes' })), 'InvalidArgument', 'readOnly must be "true" or "false"');
  });
});

describe('FlexVolume options: fsGroup', () => {
  it('comes from kubelet\'s mounterArgs.FsGroup, or from the older fsGroup key', () => {
    expect(parseOptions(goJson({ 'kubernetes.io/mounterArgs.FsGroup': '2000' })).fsGroup).toBe(2000);
    expect(parseOptions(goJson({ 'kubernetes.io/fsGroup': '3000' })).fsGroup).toBe(3000);
    expect(parseOptions(goJson({ 'kubernetes.io/mounterArgs.FsGroup': '2000', 'kubernetes.io/fsGroup': '3000' })).fsGroup).toBe(2000);
    expect(parseOptions(goJson({ 'kubernetes.io/mounterArgs.FsGroup': '' }))).not.toHaveProperty('fsGroup');
  });

  it.each([['-1'], ['root'], ['4294967295'], ['1e3']])('%j is not a group id', (gid) => {
    expectThrows(() => parseOptions(goJson({ 'kubernetes.io/mounterArgs.FsGroup': gid })), 'InvalidArgument', 'fsGroup must be a group id');
  });
});

describe('FlexVolume options: secrets are checked but never echoed', () => {
  it('base64 secrets are accepted and only their key names are kept', () => {
    const o = parseOptions(goJson({ 'kubernetes.io/secret/password': 'aHVudGVyMg==', 'kubernetes.io/secret/user': '' }));
    expect(o.secretKeys).toEqual(['password', 'user']);
  });

  it.each([['hunter2!'], ['aGk'], ['a b=']])('a secret that is not base64 (%j) is refused, naming the key and not the value', (value) => {
    const err = expectThrows(() => parseOptions(goJson({ 'kubernetes.io/secret/password': value })), 'InvalidArgument', 'secret "password" is not base64');
    expect(err.message).not.toContain(value);
  });
});

describe('FlexVolume options: what is not a JSON object of strings is refused before anything is touched', () => {
  it('a missing argument', () => {
    expectThrows(() => parseOptions(undefined), 'InvalidArgument', 'the options JSON argument is missing');
  });

  it.each([['{'], [''], ['{"a":1,}'], ["{'a':'b'}"]])('%j is not valid JSON', (text) => {
    expectThrows(() => parseOptions(text), 'InvalidArgument', 'the options argument is not valid JSON');
  });

  it.each([['[]'], ['"str"'], ['null'], ['42']])('%s is not an object', (text) => {
    expectThrows(() => parseOptions(text), 'InvalidArgument', 'options must be a JSON object');
  });

  it.each([['{"volumeId": 1}'], ['{"size": null}'], ['{"backend": ["dir"]}'], ['{"kubernetes.io/readwrite": {"x":"y"}}']])('%s has a value that is not a string', (text) => {
    expectThrows(() => parseOptions(text), 'InvalidArgument', 'must be a string');
  });

  it('__proto__ is an unknown option like any other key, not one that vanishes', () => {
    expectThrows(() => parseOptions('{"__proto__": "x"}'), 'InvalidArgument', 'unknown option "__proto__"');
  });

  it('options larger than 64 KiB are refused', () => {
    expectThrows(() => parseOptions(goJson({ 'kubernetes.io/pod.name': 'x'.repeat(70_000) })), 'InvalidArgument', 'options is larger than 65536 bytes');
  });
});
