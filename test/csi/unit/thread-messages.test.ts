import { describe, expect, it } from 'vitest';
import { parseFromService, parseToService } from '../../../csi/thread-messages.js';

/**
 * The messages between the CSI server's two threads (csi/service-thread.ts): what passes is exactly
 * what was meant, and anything else is an error that names the message, never a call left waiting.
 */
describe('csi/thread-messages.ts', () => {
  it('passes every message to the service thread as it was sent', () => {
    const sent = [
      { type: 'start', argv: ['--endpoint', 'unix:///csi.sock'], unanswered: new Int32Array(new SharedArrayBuffer(4)), nativeMount: '/opt/twinvol-mount.node' },
      { type: 'start', argv: [], unanswered: new Int32Array(new SharedArrayBuffer(4)), nativeMount: null },
      { type: 'call', id: 7, service: 'Node', method: 'NodeStageVolume', request: { volume_id: 'v', secrets: { a: 'b' } } },
      { type: 'observe', method: 'Probe', code: 'OK', seconds: 0.001 },
      { type: 'stop' },
    ];
    for (const m of sent) expect(parseToService(structuredClone(m))).toEqual(m);
  });

  it('gives the service thread the very count of unanswered calls the main thread keeps, not a copy', () => {
    const unanswered = new Int32Array(new SharedArrayBuffer(4));
    const m = parseToService(structuredClone({ type: 'start', argv: [], unanswered, nativeMount: null }));
    Atomics.add(unanswered, 0, 3);
    expect(m.type === 'start' && Atomics.load(m.unanswered, 0)).toBe(3);
  });

  it('passes every message from the service thread as it was sent', () => {
    const sent = [
      { type: 'ready', tools: { missing: [], missingOptional: ['mkfs.xfs'] }, methods: { Identity: ['Probe'], Node: ['NodeStageVolume'] } },
      { type: 'failed', message: 'cannot start: no such node' },
      { type: 'answer', id: 3, reply: { volume: { volume_id: 'v', capacity_bytes: '1048576' } } },
      { type: 'answer', id: 4, error: { code: 5, details: 'volume v does not exist' } },
      { type: 'alive' },
      { type: 'stopped' },
    ];
    for (const m of sent) expect(parseFromService(structuredClone(m))).toEqual(m);
  });

  it.each([
    null, 'start', { type: 'start' }, { type: 'start', argv: [1] }, { type: 'start', argv: [] }, { type: 'start', argv: [], unanswered: new Int32Array(1), nativeMount: null },
    { type: 'start', argv: [], unanswered: new Int32Array(new SharedArrayBuffer(4)) },
    { type: 'start', argv: [], unanswered: new Int32Array(new SharedArrayBuffer(4)), nativeMount: 7 },
    { type: 'call', id: '7', service: 'Node', method: 'X' },
    { type: 'call', id: 7, service: 'Node' }, { type: 'observe', method: 'Probe', code: 'OK' }, { type: 'answer', id: 1 },
  ])('refuses %j on its way to the service thread, naming it', (m) => {
    expect(() => parseToService(m)).toThrow(/^the service thread received a message it does not know: /);
  });

  it.each([
    undefined, 42, { type: 'answer' }, { type: 'answer', id: 1, error: { code: '5', details: 'x' } }, { type: 'answer', id: 1, error: { code: 5 } },
    { type: 'ready', tools: { missing: 'cp' }, methods: {} }, { type: 'ready', tools: { missing: [], missingOptional: [] } }, { type: 'failed' }, { type: 'call', id: 1 },
  ])('refuses %j on its way back, naming it', (m) => {
    expect(() => parseFromService(m)).toThrow(/^the CSI server received a message from its service thread it does not know: /);
  });
});
