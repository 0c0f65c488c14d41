import { describe, expect, it } from 'vitest';
import { scrub, shownOutput } from '../../shared/secret-text.js';

/**
 * shared/secret-text.ts: a secret as the text that quotes it spells it, not only as it was given.
 * The rest (its base64 and JSON forms, short ones as words) is test/exec/reply.test.ts's.
 */
describe('a secret is cut as a tool prints it', () => {
  it('trimmed: a Secret made from a file ends in a newline, which a driver strips before it quotes the value', () => {
    // kubectl create secret generic --from-file=password=./pw.txt keeps the file's last newline.
    expect(scrub('mount error(13): password hunter2 rejected for bob', ['hunter2\n'])).toBe('mount error(13): password [redacted] rejected for bob');
    expect(scrub('key " s3cr3t-t0ken " refused', ['\ts3cr3t-t0ken \r\n'])).toBe('key " [redacted] " refused');
    expect(shownOutput('bad PIN 42', ['42\n'])).toBe('bad PIN [redacted]');
  });

  it('a line at a time: a multi-line secret (a credentials file, a key) quoted one line alone, or its lines rejoined', () => {
    const credentials = 'username=bob\npassword=hunter2-5e1d\ndomain=CORP\n';
    expect(scrub('mount.cifs: bad line "password=hunter2-5e1d"', [credentials])).toBe('mount.cifs: bad line "[redacted]"');
    const key = '-----BEGIN KEY-----\r\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1t\r\n  KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAw\r\n-----END KEY-----\r\n';
    // errorDetail (shared/runner.ts) trims each line and joins them with "; ".
    expect(scrub('bad key: MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1t; KUpRKfFLfRYC9AIKjbJTWit+CqvjWYzvQwECAw', [key])).toBe('bad key: [redacted]; [redacted]');
  });

  it('a line too short to be a secret of its own is left in the text: a JSON key file\'s braces', () => {
    const json = '{\n  "private_key": "k3y-5e1d-MUST-NOT-LEAK",\n  "n": [\n  ]\n}\n';
    expect(scrub('bad line 2: "private_key": "k3y-5e1d-MUST-NOT-LEAK", in {"a": [1]}', [json])).toBe('bad line 2: [redacted] in {"a": [1]}');
    expect(shownOutput('{"status":"Failure"} [x]', [json])).toBe('{"status":"Failure"} [x]');
  });
});

describe('a secret is cut as a URL spells it', () => {
  it('percent-encoded, by any encoder\'s rule and in either case of hex; a space also as "+"', () => {
    const secret = 'p@ss! w0rd/ä.x';
    const spellings = [
      'p%40ss%21%20w0rd%2F%C3%A4.x', // Python's quote(safe=''), Go's url.PathEscape
      'p%40ss!%20w0rd%2F%C3%A4.x', // encodeURIComponent
      'p%40ss%21%20w0rd/%c3%a4.x', // lower-case hex, a slash left as it is
      'p%40ss%21+w0rd%2F%C3%A4.x', // a query's space
    ];
    for (const spelt of spellings) expect(scrub(`connect smb://bob:${spelt}@srv/share: refused`, [secret]), spelt).toBe('connect smb://bob:[redacted]@srv/share: refused');
    // Go's url.URL.String(), as a driver's error prints the URL it dialled.
    const url = new URL('smb://srv/share');
    url.username = 'bob';
    url.password = secret;
    expect(scrub(`dial ${url.href}: refused`, [secret])).not.toContain('w0rd');
  });

  it('only as the value: a dot in it stands for a dot, and text that merely looks encoded stays', () => {
    expect(scrub('p%40ssXw0rd and 100% p@ss', ['p@ss.w0rd'])).toBe('p%40ssXw0rd and 100% p@ss');
    expect(scrub('a%2Bb', ['a+b'])).toBe('[redacted]');
  });
});
