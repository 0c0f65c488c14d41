import { expect } from 'vitest';
import { outcome } from './client.js';

export const REPEATS = 10;

/**
 * Runs one lifecycle step REPEATS times, as conformance suites do, and asserts that every answer (the
 * reply, or the status code and message) is the same. Returns that answer.
 */
export async function repeated<T>(step: string, call: () => Promise<T>): Promise<{ reply?: T; code: string; message: string }> {
  const answers: string[] = [];
  let first: { reply?: T; code: string; message: string } | undefined;
  for (let i = 0; i < REPEATS; i++) {
    let reply: T | undefined;
    const o = await outcome(call().then((r) => (reply = r)));
    const answer = { ...(reply !== undefined ? { reply } : {}), code: o.code, message: o.message };
    answers.push(JSON.stringify(answer));
    first ??= answer;
  }
  expect(new Set(answers).size, `${step} answered differently when repeated: ${[...new Set(answers)].join(' | ')}`).toBe(1);
  return first!;
}

/** Like `repeated`, and the answer must be OK. */
export async function repeatedOk<T>(step: string, call: () => Promise<T>): Promise<T> {
  const a = await repeated(step, call);
  expect(a.code, `${step}: ${a.message}`).toBe('OK');
  return a.reply as T;
}
