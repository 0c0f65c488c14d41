import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcStatus, statusName } from '../../../csi/grpc-status.js';

describe('csi/grpc-status.ts', () => {
  it('numbers every code as grpc-js does, and names none that grpc-js lacks', () => {
    const theirs = Object.fromEntries(Object.entries(status).filter(([, v]) => typeof v === 'number'));
    expect(GrpcStatus).toEqual(theirs);
  });

  it('names a code as grpc-js does, and an unknown number as itself', () => {
    for (const [name, code] of Object.entries(GrpcStatus)) expect([statusName(code), status[code]]).toEqual([name, name]);
    expect(statusName(99)).toBe('99');
  });
});
