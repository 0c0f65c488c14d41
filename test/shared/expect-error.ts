import { expect } from 'vitest';
import { type ErrorCode, TwinvolError } from '../../shared/errors.js';

/** The TwinvolError a call throws, checked for its code and (optionally) a piece of its message. */
export function expectThrows(fn: () => unknown, code: ErrorCode, message?: string | RegExp): TwinvolError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  return check(caught, code, message);
}

export async function expectRejects(p: Promise<unknown> | (() => Promise<unknown>), code: ErrorCode, message?: string | RegExp): Promise<TwinvolError> {
  let caught: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    caught = err;
  }
  return check(caught, code, message);
}

function check(caught: unknown, code: ErrorCode, message?: string | RegExp): TwinvolError {
  expect(caught, 'expected a TwinvolError to be thrown').toBeInstanceOf(TwinvolError);
  const err = caught as TwinvolError;
  expect({ code: err.code, message: err.message }).toMatchObject({ code });
  if (typeof message === 'string') expect(err.message).toContain(message);
  else if (message) expect(err.message).toMatch(message);
  return err;
}
