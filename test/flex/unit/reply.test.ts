import { describe, expect, it } from 'vitest';
import { exitCodeOf, failure, type FlexReply, notSupported, success } from '../../../flex/reply.js';

describe('FlexVolume reply: the one JSON document kubelet parses, and the exit code that goes with it', () => {
  it('Success carries only the fields the verb answers with', () => {
    expect(success()).toEqual({ status: 'Success' });
    expect(success({ device: '/dev/loop3' })).toEqual({ status: 'Success', device: '/dev/loop3' });
    expect(success({ attached: false })).toEqual({ status: 'Success', attached: false });
  });

  it('Failure carries its message', () => {
    expect(failure('volume v is attached to node b')).toEqual({ status: 'Failure', message: 'volume v is attached to node b' });
  });

  it('Not supported has no message unless one is given', () => {
    expect(notSupported()).toEqual({ status: 'Not supported' });
    expect(Object.keys(notSupported())).toEqual(['status']);
    expect(notSupported('no')).toEqual({ status: 'Not supported', message: 'no' });
  });

  it.each([
    [success(), 0],
    [success({ capabilities: { attach: false } }), 0],
    [notSupported(), 0],
    [failure('x'), 1],
  ] as [FlexReply, number][])('%j exits %i (kubelet takes a non-zero exit with Success for a failure)', (reply, code) => {
    expect(exitCodeOf(reply)).toBe(code);
  });
});
