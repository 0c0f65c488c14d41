import { describe, expect, it } from 'vitest';
import {
  MAX_ID_BYTES,
  parseGid,
  validateMountOptions,
  validatePathUnder,
  validateStaticSource,
  validateStringMap,
  validateVolumeId,
} from '../../shared/validate.js';
import { expectThrows } from './expect-error.js';

describe('validateVolumeId', () => {
  it.each(['a', 'vol-1', 'pvc-0d4f.x_y', '0abc', 'A.b-C_d', 'a'.repeat(MAX_ID_BYTES)])('accepts %j', (id) => {
    expect(validateVolumeId(id)).toBe(id);
  });

  it.each([
    ['..', 'must not contain ".." or "/"'],
    ['a..b', 'must not contain ".." or "/"'],
    ['a/b', 'must not contain ".." or "/"'],
    ['/abs', 'must not contain ".." or "/"'],
    ['a\0b', 'NUL byte'],
    ['-rf', 'starting with a letter or digit'],
    ['.hidden', 'starting with a letter or digit'],
    ['_x', 'starting with a letter or digit'],
    ['a b', 'may only hold'],
    ['a:b', 'may only hold'],
    ['', 'is required'],
    ['a'.repeat(MAX_ID_BYTES + 1), 'longer than 128 bytes'],
  ])('refuses %j', (id, message) => {
    expectThrows(() => validateVolumeId(id), 'InvalidArgument', message);
  });

  it('counts bytes, not characters: 65 two-byte characters (130 bytes) are too long, 64 (128 bytes) are not', () => {
    // 'é' is 2 bytes in UTF-8: the length check must see 130 bytes although .length is 65.
    expectThrows(() => validateVolumeId('é'.repeat(65)), 'InvalidArgument', 'longer than 128 bytes');
    // 128 bytes passes the length check and is then refused by the charset, with the charset message.
    expectThrows(() => validateVolumeId('é'.repeat(64)), 'InvalidArgument', 'may only hold');
    // 126 ASCII + a 3-byte '€' = 129 bytes in 127 characters.
    expectThrows(() => validateVolumeId(`${'a'.repeat(126)}€`), 'InvalidArgument', 'longer than 128 bytes');
  });

  it.each([undefined, null, 42, {}, ['a'], true])('refuses the non-string %j', (value) => {
    expectThrows(() => validateVolumeId(value), 'InvalidArgument', 'volume id is required');
  });

  it('names the field it was asked about', () => {
    expectThrows(() => validateVolumeId('a/b', 'volumeHandle'), 'InvalidArgument', /^volumeHandle "a\/b"/);
  });
});

describe('validatePathUnder', () => {
  const root = '/var/lib/kubelet';
  const ok = (p: unknown) => validatePathUnder(p, root, 'target path');
  const bad = (p: unknown, message: string) => expectThrows(() => ok(p), 'InvalidArgument', message);

  it('accepts absolute normalised paths strictly below the root', () => {
    expect(ok('/var/lib/kubelet/pods/uid/volumes/x')).toBe('/var/lib/kubelet/pods/uid/volumes/x');
    expect(ok('/var/lib/kubelet/a')).toBe('/var/lib/kubelet/a');
  });

  it('drops trailing slashes', () => {
    expect(ok('/var/lib/kubelet/pods/x/')).toBe('/var/lib/kubelet/pods/x');
    expect(ok('/var/lib/kubelet/pods/x///')).toBe('/var/lib/kubelet/pods/x');
  });

  it('accepts a root given with a trailing slash', () => {
    expect(validatePathUnder('/var/lib/kubelet/a', '/var/lib/kubelet/', 'p')).toBe('/var/lib/kubelet/a');
  });

  it('refuses the root itself, with or without trailing slash', () => {
    bad('/var/lib/kubelet', 'is outside /var/lib/kubelet');
    bad('/var/lib/kubelet/', 'is outside /var/lib/kubelet');
    bad('/var/lib/kubelet//', 'is outside /var/lib/kubelet');
  });

  it('refuses siblings that share the root as a string prefix', () => {
    bad('/var/lib/kubelet-evil/x', 'is outside /var/lib/kubelet');
    bad('/var/lib/kubeletx', 'is outside');
  });

  it('refuses paths outside the root', () => {
    bad('/etc/passwd', 'is outside /var/lib/kubelet');
    bad('/', 'is outside');
  });

  it('refuses un-normalised paths rather than rewriting them', () => {
    bad('/var/lib/kubelet/../x', 'is not a normalised path');
    bad('/var/lib/kubelet/../../../etc', 'is not a normalised path');
    bad('/var/lib/kubelet/a/../b', 'is not a normalised path');
    bad('/var/lib/kubelet/a/..', 'is not a normalised path');
    bad('/var/lib/kubelet/./a', 'is not a normalised path');
    bad('/var/lib/kubelet//double', 'is not a normalised path');
    bad('//var/lib/kubelet/a', 'is not a normalised path');
  });

  it('refuses relative, empty, NUL-holding, oversized and non-string values', () => {
    bad('var/lib/kubelet/a', 'must be an absolute path');
    bad('./a', 'must be an absolute path');
    bad('', 'is required');
    bad(undefined, 'is required');
    bad(7, 'is required');
    bad('/var/lib/kubelet/a\0b', 'NUL byte');
    bad(`/var/lib/kubelet/${'a'.repeat(4096)}`, 'longer than 4095 bytes');
    // Exactly PATH_MAX bytes: no room for the NUL the kernel counts.
    bad(`/var/lib/kubelet/${'a/'.repeat(2039)}ab`.slice(0, 4096), 'longer than 4095 bytes');
  });

  it('names options JSON where a path belongs, without quoting a word of it (its secrets)', () => {
    const options = ' {"kubernetes.io/secret/a":"SGVsbG9TZWNyZXQ="}';
    const { message } = expectThrows(() => ok(options), 'InvalidArgument', 'is a JSON object, not a path: are the arguments out of order?');
    expect(message).not.toContain('SGVs');
    expect(message).not.toContain('secret');
  });

  // Found by test/fuzz/csi-requests.test.ts: a 300-byte component reached realpath, whose ENAMETOOLONG
  // came back as INTERNAL, though the caller's path was at fault.
  it('refuses a path component longer than a file name can be (255 bytes), counting bytes', () => {
    expect(ok(`/var/lib/kubelet/pods/${'a'.repeat(255)}/mount`)).toBe(`/var/lib/kubelet/pods/${'a'.repeat(255)}/mount`);
    bad(`/var/lib/kubelet/pods/${'a'.repeat(256)}/mount`, 'has a component longer than 255 bytes');
    bad(`/var/lib/kubelet/${'\u00e9'.repeat(128)}`, 'has a component longer than 255 bytes');
  });
});

describe('validateMountOptions', () => {
  it('splits a comma list and accepts arrays', () => {
    expect(validateMountOptions('ro,noexec,size=64m')).toEqual(['ro', 'noexec', 'size=64m']);
    expect(validateMountOptions(['vers=4.1', 'addr=10.0.0.1', 'context=system_u:object_r:x:s0'])).toEqual([
      'vers=4.1',
      'addr=10.0.0.1',
      'context=system_u:object_r:x:s0',
    ]);
  });

  it('treats undefined and "" as no options', () => {
    expect(validateMountOptions(undefined)).toEqual([]);
    expect(validateMountOptions('')).toEqual([]);
    expect(validateMountOptions([])).toEqual([]);
  });

  it.each([
    ['ro,no exec'],
    ['ro,"x"'],
    ["ro,'x'"],
    ['uid=1000 gid=0'],
    ['path=/a/../b'],
    ['ro,,noexec'],
    ['ro,'],
    [',ro'],
    ['-oexec'],
    ['ro;rm -rf /'],
  ])('refuses the string %j', (value) => {
    expectThrows(() => validateMountOptions(value), 'InvalidArgument', 'is not allowed');
  });

  it('refuses the same items in arrays, and non-string items', () => {
    expectThrows(() => validateMountOptions(['ro', 'a b']), 'InvalidArgument', 'mount option "a b" is not allowed');
    expectThrows(() => validateMountOptions(['ro', '']), 'InvalidArgument', 'is not allowed');
    expectThrows(() => validateMountOptions(['x..y']), 'InvalidArgument', 'is not allowed');
    expectThrows(() => validateMountOptions(['ro', 5]), 'InvalidArgument', 'is not allowed');
  });

  it('refuses values that are neither string nor list', () => {
    expectThrows(() => validateMountOptions({ ro: true }), 'InvalidArgument', 'comma-separated string or a list');
    expectThrows(() => validateMountOptions(3), 'InvalidArgument', 'comma-separated string or a list');
  });
});

describe('validateStaticSource', () => {
  it.each(['tmpfs', '/dev/sdb', '/srv/images/a.img', 'nfs.example.com:/exports/a', '10.0.0.5:/x'])('accepts %j', (s) => {
    expect(validateStaticSource(s)).toBe(s);
  });

  it.each([
    ['', 'source is required'],
    ['/srv/../etc', 'is not a valid mount source'],
    ['host:/a/../b', 'is not a valid mount source'],
    ['/a\0b', 'is not a valid mount source'],
    [`/${'a'.repeat(1024)}`, 'is not a valid mount source'],
    ['relative/path', 'must be an absolute path'],
    ['/with space', 'must be an absolute path'],
    ['/a,b', 'must be an absolute path'],
    ['TMPFS', 'must be an absolute path'],
    ['host:relative', 'must be an absolute path'],
  ])('refuses %j', (s, message) => {
    expectThrows(() => validateStaticSource(s), 'InvalidArgument', message);
  });

  it('refuses non-strings', () => {
    expectThrows(() => validateStaticSource(undefined), 'InvalidArgument', 'source is required');
    expectThrows(() => validateStaticSource(['tmpfs']), 'InvalidArgument', 'source is required');
  });
});

describe('validateStringMap', () => {
  it('returns a copy of a string map', () => {
    const input = { a: '1', 'kubernetes.io/fsType': 'ext4' };
    const out = validateStringMap(input, 'options');
    expect(out).toEqual(input);
    expect(out).not.toBe(input);
  });

  it('refuses non-objects and non-string values, naming the key', () => {
    expectThrows(() => validateStringMap(null, 'options'), 'InvalidArgument', 'options must be a JSON object');
    expectThrows(() => validateStringMap(['a'], 'options'), 'InvalidArgument', 'options must be a JSON object');
    expectThrows(() => validateStringMap('a=b', 'options'), 'InvalidArgument', 'options must be a JSON object');
    expectThrows(() => validateStringMap({ size: 5 }, 'options'), 'InvalidArgument', 'options: value of "size" must be a string');
    expectThrows(() => validateStringMap({ a: { b: 'c' } }, 'options'), 'InvalidArgument', 'value of "a"');
  });

  it('keeps every key the input has, __proto__ included, as an own key of the copy', () => {
    const out = validateStringMap(JSON.parse('{"__proto__": "x", "a": "1"}'), 'options');
    expect(Object.keys(out)).toEqual(['__proto__', 'a']);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
  });

  it('counts keys and values in bytes against the limit, inclusive', () => {
    // 1-byte key + 9-byte value = 10 bytes.
    expect(validateStringMap({ k: 'v'.repeat(9) }, 'params', 10)).toEqual({ k: 'vvvvvvvvv' });
    expectThrows(() => validateStringMap({ k: 'v'.repeat(10) }, 'params', 10), 'InvalidArgument', 'params is larger than 10 bytes');
    // 'é' is 2 bytes: 1 + 2*5 = 11 bytes in 6 characters.
    expectThrows(() => validateStringMap({ k: 'é'.repeat(5) }, 'params', 10), 'InvalidArgument', 'larger than 10 bytes');
    // The default limit is 64 KiB.
    expect(() => validateStringMap({ k: 'x'.repeat(64 * 1024 - 1) }, 'p')).not.toThrow();
    expectThrows(() => validateStringMap({ k: 'x'.repeat(64 * 1024) }, 'p'), 'InvalidArgument', 'larger than 65536 bytes');
  });
});

describe('parseGid', () => {
  it.each([
    ['0', 0],
    ['1000', 1000],
    ['4294967294', 4294967294],
    [undefined, undefined],
    ['', undefined],
  ])('parses %j as %j', (input, expected) => {
    expect(parseGid(input, 'fsGroup')).toBe(expected);
  });

  it.each(['4294967295', '12345678901', '-1', '1.5', 'abc', ' 1', '1 ', '0x10', '1e3'])('refuses %j', (input) => {
    expectThrows(() => parseGid(input, 'fsGroup'), 'InvalidArgument', 'fsGroup must be a group id');
  });
});
