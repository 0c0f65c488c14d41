import { describe, expect, it } from 'vitest';
import { parseFlags, UsageError } from '../../csi/flags.js';

/** The exec backend's command-line flags (csi/flags.ts): each read, each mistake a usage error. */
const EP = ['--endpoint', 'unix:///run/csi/csi.sock'];

describe('exec flags', () => {
  it('reads every --flex-* flag and --backends', () => {
    const f = parseFlags([...EP, '--backends', 'exec', '--flex-driver', 'acme/nfs', '--flex-plugin-dir', '/opt/flex/', '--flex-timeout-ms', '5000', '--flex-lenient', 'acme/nfs', '--flex-lenient', 'b/c', '--flex-inline', 'acme/nfs', '--flex-exec', 'host'], {});
    expect(f.exec).toEqual({ only: true, driver: 'acme/nfs', pluginDir: '/opt/flex', timeoutMs: 5000, lenient: ['acme/nfs', 'b/c'], inline: ['acme/nfs'], execIn: 'host' });
  });

  it.each([
    [['--backends', 'exec'], '--backends exec needs --flex-driver'],
    [['--backends', 'block'], '--backends must be all or exec'],
    [['--flex-driver', 'nfs'], 'must be <vendor>/<name>'],
    [['--flex-driver', 'a/b/c'], 'must be <vendor>/<name>'],
    [['--flex-lenient', '../x'], 'must be <vendor>/<name>'],
    [['--flex-inline', 'x'], 'must be <vendor>/<name>'],
    [['--flex-plugin-dir', 'relative'], 'must be an absolute path'],
    [['--flex-timeout-ms', '5s'], 'whole number'],
    // Digits were counted, not the value: 000 passed, and every driver call was killed at 0 ms.
    [['--flex-timeout-ms', '000'], 'from 100 to 2147483647'],
    [['--flex-timeout-ms', '050'], 'from 100 to 2147483647'],
    [['--flex-timeout-ms', '3000000000'], 'from 100 to 2147483647'],
    [['--flex-exec', 'chroot'], 'local or host'],
  ])('%j is refused', (args, message) => {
    expect(() => parseFlags([...EP, ...args], {})).toThrow(UsageError);
    expect(() => parseFlags([...EP, ...args], {})).toThrow(message);
  });
});
