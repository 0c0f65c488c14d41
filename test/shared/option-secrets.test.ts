import { describe, expect, it } from 'vitest';
import { redact, redactOptionValues, secretOptionValues } from '../../shared/log.js';
import { validateMountOptions } from '../../shared/validate.js';
import { expectThrows } from './expect-error.js';

/**
 * shared/log.ts: a secret option's value among mount options is cut whole, as the filesystem reads
 * where it ends. The CIFS client reads a doubled comma in a password as a comma of it (the kernel's
 * fs/smb/client/fs_context.c), and libmount a quoted value as one, commas and all.
 */
describe('a secret option\'s value is cut where it ends, not at its first comma', () => {
  const cases = [
    ['username=bob,password=Xy7,,S3cret-Part,vers=3.0', 'username=bob,password=[redacted],vers=3.0', ['Xy7,,S3cret-Part', 'Xy7,S3cret-Part']],
    ['password="Xy7,S3cret-Part",vers=3.0', 'password=[redacted],vers=3.0', ['"Xy7,S3cret-Part"', 'Xy7,S3cret-Part']],
    ['password=Xy7,,', 'password=[redacted]', ['Xy7,,', 'Xy7,']],
    ['password=plain,ro', 'password=[redacted],ro', ['plain']],
  ] as const;

  it.each(cases)('%s', (arg, redacted, values) => {
    expect(redactOptionValues(arg)).toBe(redacted);
    expect(secretOptionValues(arg)).toEqual(values);
    expect(JSON.stringify(redact({ mount_flags: [arg] }))).not.toContain('S3cret-Part');
  });

  it('is left out of the refusal of such an option, which reaches the gRPC status and an Event', () => {
    const err = expectThrows(() => validateMountOptions(['password=Xy7,,S3cret-Part'], 'mount_flags'), 'InvalidArgument', 'is not allowed');
    expect(err.message).not.toContain('S3cret-Part');
  });
});

/** mount.cifs(8): a user name may carry the password after a `%` (deprecated, still taken). */
describe('a password within a CIFS user name is cut', () => {
  const cases = [
    ['username=bob%S3cret-Part,vers=3.0', 'username=bob%[redacted],vers=3.0', ['S3cret-Part']],
    ['vers=3.0,user=bob%S3cret%Part', 'vers=3.0,user=bob%[redacted]', ['S3cret%Part']],
    ['USERNAME=bob%S3cret-Part', 'USERNAME=bob%[redacted]', ['S3cret-Part']],
  ] as const;

  it.each(cases)('%s', (arg, redacted, values) => {
    expect(redactOptionValues(arg)).toBe(redacted);
    expect(secretOptionValues(arg)).toEqual(values);
    expect(JSON.stringify(redact({ mount_flags: [arg] }))).not.toContain('S3cret');
  });

  it.each(['username=bob', 'user=bob%', 'domain=a%b', 'uid=1000'])('leaves %s whole', (arg) => {
    expect(redactOptionValues(arg)).toBe(arg);
    expect(secretOptionValues(arg)).toEqual([]);
  });
});
