import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDriverName } from '../../shared/backends/exec.js';
import { FlexDrivers } from '../../shared/backends/exec-driver.js';
import { scrub, shownOutput } from '../../shared/secret-text.js';
import { defaultCapabilities, jsonObjectsIn, readReply, type ScanMeter } from '../../shared/backends/exec-reply.js';
import { flexArgv } from '../../shared/backends/exec-volumes.js';

/**
 * Replies read as kubelet reads them (kubernetes pkg/volume/flexvolume/driver-call.go: CombinedOutput
 * into json.Unmarshal, then the status), and the lenient reading, on the cases Go decides in ways a
 * JSON.parse alone would not.
 */
const strict = (output: string, exitCode = 0) => readReply('mount', { exitCode, output }, 'strict').outcome;
const lenient = (output: string, exitCode = 0) => readReply('mount', { exitCode, output }, 'lenient');

describe('strict: kubelet\'s rules', () => {
  it('Success, with kubelet\'s default capabilities where init leaves them out', () => {
    const r = strict('{"status":"Success","capabilities":{"attach":false}}\n');
    expect(r).toEqual({ kind: 'success', status: expect.objectContaining({ capabilities: { ...defaultCapabilities(), attach: false } }) });
    expect(strict('  {"status":"Success"}  \n')).toMatchObject({ kind: 'success', status: { capabilities: defaultCapabilities() } });
  });

  it('keys match case-insensitively, as Go\'s decoder does', () => {
    expect(strict('{"STATUS":"Success","Device":"/dev/sdz"}')).toMatchObject({ kind: 'success', status: { device: '/dev/sdz' } });
    expect(strict('{"status":"Success","Capabilities":{"ATTACH":false}}')).toMatchObject({ kind: 'success', status: { capabilities: { attach: false } } });
  });

  it('Not supported is its own answer whatever the exit code', () => {
    expect(strict('{"status":"Not supported"}', 1)).toEqual({ kind: 'not-supported' });
    expect(strict('{"status":"Not supported"}', 0)).toEqual({ kind: 'not-supported' });
  });

  it('anything else is a failure carrying the driver\'s message, in kubelet\'s words', () => {
    expect(strict('{"status":"Failure","message":"disk gone"}', 1)).toEqual({ kind: 'failure', message: 'mount command failed, status: Failure, reason: disk gone' });
    // null decodes to nothing: an empty status.
    expect(strict('null')).toEqual({ kind: 'failure', message: 'mount command failed, status: , reason: ' });
  });

  it('not exactly one JSON object is a failure: noise, two objects, nothing, a non-object, a wrong type', () => {
    for (const bad of ['warning\n{"status":"Success"}', '{"status":"Success"}{"status":"Success"}', '', '"Success"', '[{"status":"Success"}]', '{"status":"Success","attached":"yes"}', '{"status":"Success","volumeNewSize":1.5}'])
      expect(strict(bad)).toMatchObject({ kind: 'failure' });
  });

  it('Success with a non-zero exit code is a driver bug', () => {
    expect(strict('{"status":"Success"}', 1)).toEqual({ kind: 'failure', message: 'mount: driver bug: exit code 1 but Success in the reply' });
  });
});

describe('lenient: the last JSON status object, the rest set aside', () => {
  it('takes the reply out of noise, past a JSON-looking dict in a traceback', () => {
    const r = lenient('WARNING: x\n{"status":"Success","device":"/dev/a"}\nTraceback:\n  f({"tmp": 1})\n');
    expect(r.outcome).toMatchObject({ kind: 'success', status: { device: '/dev/a' } });
    expect(r.quirks.join()).toContain('Traceback');
  });

  it('Success with exit code 1 stands, noted; an empty output is Not supported', () => {
    expect(lenient('{"status":"Success"}', 1)).toEqual({ outcome: expect.objectContaining({ kind: 'success' }), quirks: ['exit code 1 with Success'] });
    expect(lenient('', 1).outcome).toEqual({ kind: 'not-supported' });
  });

  it('no status object at all is a failure', () => {
    expect(lenient('usage: driver <verb>\n{"unrelated": true}').outcome).toMatchObject({ kind: 'failure' });
  });
});

/** The reading jsonObjectsIn replaced, one brace at a time (quadratic): what it must still choose. */
function perBraceReading(text: string): { start: number; end: number; value: Record<string, unknown> }[] {
  const found: { start: number; end: number; value: Record<string, unknown> }[] = [];
  const balancedEnd = (start: number): number => {
    let depth = 0;
    let inString = false;
    for (let i = start; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        if (c === '\\') i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{') depth++;
      else if (c === '}' && --depth === 0) return i + 1;
    }
    return -1;
  };
  for (let i = text.indexOf('{'); i >= 0; ) {
    const end = balancedEnd(i);
    let value: unknown;
    try {
      value = end > 0 ? JSON.parse(text.slice(i, end)) : undefined;
    } catch {
      value = undefined;
    }
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      found.push({ start: i, end, value: value as Record<string, unknown> });
      i = text.indexOf('{', end);
    } else i = text.indexOf('{', i + 1);
  }
  return found;
}

describe('lenient: hostile output is read in linear time, choosing as before', () => {
  const REPLY = '\n{"status":"Success","device":"/dev/x"}\n';
  const fill = (unit: string) => unit.repeat(Math.floor((4 * 1024 * 1024 - REPLY.length) / unit.length)) + REPLY;

  // Before, each of these had every `{` read to the end of the output (or JSON.parse run to the same
  // far error): 80k `{` took 7.5 s, 4 MiB would take hours. Characters read are counted: no clock.
  it.each([
    ['{', fill('{')],
    ['{" (every other brace inside a string of the reading before)', fill('{"')],
    ['{"a": (one reading nests all the way)', fill('{"a":')],
    ['{"a": nested, then an error deep inside', `${'{"a":'.repeat(400_000)}x${'}'.repeat(400_000)}${REPLY}`],
  ])('4 MiB of %s before the reply', (_, text) => {
    const meter: ScanMeter = { scanned: 0, parsed: 0 };
    expect(jsonObjectsIn(text, meter).at(-1)?.value).toEqual({ status: 'Success', device: '/dev/x' });
    expect(meter.scanned).toBeGreaterThan(0);
    expect(meter.scanned).toBeLessThanOrEqual(3 * text.length);
    expect(meter.parsed).toBeLessThanOrEqual(text.length);
    expect(lenient(text).outcome).toMatchObject({ kind: 'success', status: { device: '/dev/x' } });
  });

  it('a `{` inside a string of a failed reading is read from afresh (one string state for the whole text would lose the reply)', () => {
    const r = lenient('error near { "path\n{"status":"Success","device":"/dev/y"}\n');
    expect(r.outcome).toMatchObject({ kind: 'success', status: { device: '/dev/y' } });
    expect(r.quirks).toEqual(['output around the reply: error near { "path']);
  });

  it('chooses what the per-brace reading chose, on random output', () => {
    const pieces = ['{', '}', '"', '\\', ':', ',', '[', ']', ' ', 'a', '1', '-', 'e', 'tru', 'null', '\u0001', 'u00e9', "{'k': 1}"];
    const objects = ['{"status":"x"}', '{}', '{"a":[1,{"b":"}"}]}', '{"s":"\\"{\\\\"}', '{"a":', '"status"', '{"a":-0.5e+1,"b":true}'];
    let seed = 20_240_601;
    const pick = (n: number) => ((seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) >>> 16) % n;
    let agreed = 0;
    for (let round = 0; round < 20_000; round++) {
      let text = '';
      for (let n = 1 + pick(16); n > 0; n--) text += pick(3) ? pieces[pick(pieces.length)] : objects[pick(objects.length)];
      const expected = perBraceReading(text);
      expect(jsonObjectsIn(text), text).toEqual(expected);
      if (expected.length) agreed++;
    }
    // Enough of them hold an object for the agreement to mean something.
    expect(agreed).toBeGreaterThan(2_000);
  });
});

describe('secrets: cut out of the driver text an error or a log line shows', () => {
  it('every form of a secret goes, the longest first; one of one or two characters only as a word of its own', () => {
    const secret = 'pä"ss-word';
    const forms = [secret, Buffer.from(secret).toString('base64'), 'pä\\"ss-word', 'p\\u00e4\\"ss-word'];
    expect(scrub(forms.join(' | '), [secret])).toBe('[redacted] | [redacted] | [redacted] | [redacted]');
    expect(scrub('xabcdefx abc', ['abc', 'abcdef'])).toBe('x[redacted]x [redacted]');
    expect(scrub('bad PIN 42 (PIN42, 1425)', ['42'])).toBe('bad PIN [redacted] (PIN42, 1425)');
    // The driver's own text is withheld whole while the short one is still in a word.
    expect(shownOutput('bad PIN 42', ['42'])).toBe('bad PIN [redacted]');
    expect(shownOutput('bad PIN42', ['42'])).toBe('[withheld: holds a short secret]');
    expect(shownOutput('bad password', [])).toBe('bad password');
  });
});

describe('secrets: no error and no log line of a driver call shows one', () => {
  let root: string;
  const logged: unknown[] = [];
  const TARGET = '/var/lib/kubelet/pods/p/volumes/acme~leak/v';

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'twinvol-reply-secrets-'));
    // Prints whatever the test left in `reply`, with the exit code in `code`.
    const script = '#!/bin/sh\nhere=$(dirname "$0")\n[ "$1" = init ] && { echo \'{"status":"Success","capabilities":{"attach":false}}\'; exit 0; }\ncat "$here/reply"; exit "$(cat "$here/code")"\n';
    for (const name of ['leak', 'leaky']) {
      mkdirSync(join(root, `acme~${name}`));
      writeFileSync(join(root, `acme~${name}`, name), script, { mode: 0o755 });
    }
  });
  afterAll(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /** A publish with `secret` as the password, the driver printing `output`: what the CO and the log get. */
  async function publish(driver: 'leak' | 'leaky', secret: string, output: (argv: string) => string, code = 1): Promise<{ error: string; log: string }> {
    const flex = new FlexDrivers({ pluginDir: root, timeoutMs: 10_000, lenient: ['acme/leaky'], execIn: 'local' }, (level, message, fields) => logged.push({ level, message, fields }));
    const name = parseDriverName(`acme/${driver}`);
    // The secret reaches the call only inside the options argument, as kubelet passes it: FlexDrivers finds it there.
    const args = flexArgv.mount({ id: 'v', driver: name, options: {}, fsType: '' }, TARGET, { readonly: false, secrets: { password: secret } });
    writeFileSync(join(root, `acme~${driver}`, 'reply'), output(args.join(' ')));
    writeFileSync(join(root, `acme~${driver}`, 'code'), String(code));
    logged.length = 0;
    const error = await flex.call(name, 'mount', args).then(
      () => '',
      (err: unknown) => String(err instanceof Error ? err.message : err),
    );
    return { error, log: stringsIn(logged).join('\n') };
  }

  /** Neither the secret nor its base64 form, nor a piece of either of 5 characters (the whole, if shorter). */
  function expectNoneOf(secret: string, ...texts: string[]) {
    for (const value of [secret, Buffer.from(secret).toString('base64')]) {
      const n = Math.min(5, value.length);
      for (let i = 0; i + n <= value.length; i++) for (const text of texts) expect(text, `"${value.slice(i, i + n)}" shown`).not.toContain(value.slice(i, i + n));
    }
  }

  it("JSON.parse's message, which quotes the output, is not passed on", async () => {
    const secret = 'Tr0ub4dor&3-correct';
    const { error, log } = await publish('leak', secret, () => `${secret} was refused\n`);
    expectNoneOf(secret, error, log);
    expect(error).toContain('not one JSON status object (invalid JSON; exit code 1): [redacted] was refused');
  });

  it('a secret across the 600-character cut of the excerpt goes whole', async () => {
    const secret = 'correct-horse-battery-staple';
    // 14 characters of it fall inside the last 600 of the output.
    const noise = (argv: string) => `${'warning: '.repeat(80)}${argv}\n${secret}\n${'y'.repeat(585)}`;
    const strict = await publish('leak', secret, noise);
    expect(strict.error).toContain('not one JSON status object');
    const lenient = await publish('leaky', secret, (argv) => `${noise(argv)}\n{"status":"Success"}\n`, 0);
    expect(lenient.error).toBe('');
    expect(lenient.log).toContain('output around the reply: ...');
    expectNoneOf(secret, strict.error, strict.log, lenient.log);
  });

  it('a secret of two characters: cut where it stands alone, the whole text withheld where it is inside a word', async () => {
    const alone = await publish('leak', '42', () => '{"status":"Failure","message":"bad PIN 42"}');
    const inWord = await publish('leaky', '42', (argv) => `argv: ${argv}\n{"status":"Failure","message":"bad PIN42"}`);
    const strict = await publish('leak', '42', (argv) => `argv: ${argv} PIN=42\n`);
    expectNoneOf('42', alone.error, alone.log, inWord.error, inWord.log, strict.error, strict.log);
    expect(alone.error).toBe('FlexVolume driver acme/leak: mount command failed, status: Failure, reason: bad PIN [redacted]');
    expect(inWord.error).toBe('FlexVolume driver acme/leaky: mount command failed, status: Failure, reason: [withheld: holds a short secret]');
    expect(strict.error).toMatch(/exit code 1\): argv: \/var\/lib\/kubelet\/.*"kubernetes.io\/secret\/password":"\[redacted\]"} PIN=\[redacted\]$/);
  });
});

/** Every string in a log line's message and fields (its numbers, a duration say, are not the driver's text). */
function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(stringsIn);
  if (value && typeof value === 'object') return Object.values(value).flatMap(stringsIn);
  return [];
}
