import { describe, expect, it } from 'vitest';
import { defaultCapabilities, readReply } from '../../shared/backends/exec-reply.js';

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
