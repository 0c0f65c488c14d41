import { type handleUnaryCall, status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { boundedDetails, DETAILS_CAP, invokeUnary, Rpc } from '../../../csi/rpc.js';
import { type ErrorCode, TwinvolError } from '../../../shared/errors.js';
import { Logger } from '../../../shared/log.js';

interface Answer {
  code: keyof typeof status;
  details: string;
  reply?: unknown;
}

/** An Rpc whose log lines are collected, parsed. */
function rpcWithLog(): { rpc: Rpc; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { rpc: new Rpc(new Logger((line) => lines.push(JSON.parse(line) as Record<string, unknown>))), lines };
}

/** Calls a wrapped handler with only what the wrapper reads, the request, as the service thread does. */
async function invoke<Req, Res>(handler: handleUnaryCall<Req, Res>, request: Req): Promise<Answer> {
  const answer = await invokeUnary(handler, request);
  if ('error' in answer) return { code: status[answer.error.code] as keyof typeof status, details: answer.error.details };
  return { code: 'OK', details: '', reply: answer.reply };
}

/** A promise the test settles by hand, to hold a call in flight. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** The CSI status each core error code answers with, written out (the spec's table, not csi/rpc.ts's). */
const EXPECTED: Record<ErrorCode, keyof typeof status> = {
  InvalidArgument: 'INVALID_ARGUMENT',
  NotFound: 'NOT_FOUND',
  AlreadyExists: 'ALREADY_EXISTS',
  FailedPrecondition: 'FAILED_PRECONDITION',
  ResourceExhausted: 'RESOURCE_EXHAUSTED',
  OutOfRange: 'OUT_OF_RANGE',
  Aborted: 'ABORTED',
  Unimplemented: 'UNIMPLEMENTED',
  Unavailable: 'UNAVAILABLE',
  Internal: 'INTERNAL',
};

describe('error mapping: each core ErrorCode answers its gRPC status, with its message as the details', () => {
  it.each(Object.entries(EXPECTED))('%s is %s', async (code, grpcCode) => {
    const { rpc } = rpcWithLog();
    const h = rpc.unary<object, object>('M', async () => {
      throw new TwinvolError(code as ErrorCode, `volume v: ${code}`);
    });
    expect(await invoke(h, {})).toEqual({ code: grpcCode, details: `volume v: ${code}` });
  });

  it.each([
    ['an Error', () => new Error('disk on fire')],
    ['a TypeError from a bug', () => new TypeError('disk on fire')],
  ])('anything else (%s) is INTERNAL with its message only, never a stack', async (_, make) => {
    const { rpc } = rpcWithLog();
    const h = rpc.unary<object, object>('M', async () => {
      throw make();
    });
    const answer = await invoke(h, {});
    expect(answer).toEqual({ code: 'INTERNAL', details: 'disk on fire' });
    expect(answer.details).not.toMatch(/\n|\bat \S+:\d+|Error:/);
  });

  it('a thrown non-Error is INTERNAL with its text', async () => {
    const { rpc } = rpcWithLog();
    const h = rpc.unary<object, object>('M', () => Promise.reject('plain words'));
    expect(await invoke(h, {})).toEqual({ code: 'INTERNAL', details: 'plain words' });
  });

  it('a handler that throws before returning a promise is mapped the same way', async () => {
    const { rpc } = rpcWithLog();
    const h = rpc.unary<object, object>('M', () => {
      throw new TwinvolError('NotFound', 'volume v does not exist');
    });
    expect(await invoke(h, {})).toEqual({ code: 'NOT_FOUND', details: 'volume v does not exist' });
  });

  it('a reply passes through unchanged', async () => {
    const { rpc } = rpcWithLog();
    const h = rpc.unary<{ n: number }, { doubled: number }>('M', async (r) => ({ doubled: r.n * 2 }));
    expect(await invoke(h, { n: 21 })).toEqual({ code: 'OK', details: '', reply: { doubled: 42 } });
  });

  it('a message past the cap keeps its start and end, in the status and the log line alike', async () => {
    const { rpc, lines } = rpcWithLog();
    const reason = `driver says: ${'x'.repeat(1 << 20)} the end`;
    const h = rpc.unary<object, object>('M', async () => {
      throw new TwinvolError('Internal', reason);
    });
    const answer = await invoke(h, {});
    expect(answer.code).toBe('INTERNAL');
    expect(answer.details).toMatch(/^driver says: x+ \.\.\. \(\d+ characters left out\) \.\.\. x+ the end$/);
    expect(answer.details).toContain(`(${reason.length - DETAILS_CAP} characters left out)`);
    expect(answer.details.replace(/ \.\.\. \(\d+ characters left out\) \.\.\. /, '')).toHaveLength(DETAILS_CAP);
    expect(lines).toMatchObject([{ level: 'error', code: 'INTERNAL', message: answer.details }]);
  });

  it('a message at the cap is whole; a cut never splits a surrogate pair', () => {
    const exact = 'a'.repeat(DETAILS_CAP);
    expect(boundedDetails(exact)).toBe(exact);
    // Both cuts fall between a pair's halves: the head then ends before the pair, the tail after it.
    const cut = boundedDetails(`${'a'.repeat(DETAILS_CAP / 2 - 1)}${'\u{1F600}'.repeat(DETAILS_CAP)}${'b'.repeat(DETAILS_CAP / 2 - 1)}`);
    // A lone half would not survive UTF-8, as the trailer carries it.
    expect(Buffer.from(cut, 'utf8').toString('utf8')).toBe(cut);
    expect(cut).toMatch(/^a{2047} \.\.\. \(\d+ characters left out\) \.\.\. b{2047}$/u);
  });

  it('an RPC twinvol does not offer is UNIMPLEMENTED, never INTERNAL', async () => {
    const { rpc, lines } = rpcWithLog();
    expect(await invoke(rpc.unimplemented<object, object>('ControllerModifyVolume'), {})).toEqual({
      code: 'UNIMPLEMENTED',
      details: 'ControllerModifyVolume is not implemented by twinvol',
    });
    expect(lines).toMatchObject([{ level: 'warn', method: 'ControllerModifyVolume', code: 'UNIMPLEMENTED' }]);
  });
});

describe('one call at a time per object: a second call on a key in flight is ABORTED at once', () => {
  type Req = { id: string };
  const exclusive = { exclusiveOn: (r: Req) => `volume/${r.id}` };

  it('the second call on the same key is ABORTED naming what runs; the first still finishes', async () => {
    const { rpc } = rpcWithLog();
    const gate = deferred<object>();
    const stage = rpc.unary<Req, object>('NodeStageVolume', () => gate.promise, exclusive);
    const publish = rpc.unary<Req, object>('NodePublishVolume', async () => ({}), exclusive);
    const first = invoke(stage, { id: 'v' });
    expect(await invoke(publish, { id: 'v' })).toEqual({ code: 'ABORTED', details: 'NodeStageVolume on volume/v is still in progress; try again' });
    gate.resolve({});
    expect((await first).code).toBe('OK');
  });

  it('calls on different keys run side by side', async () => {
    const { rpc } = rpcWithLog();
    const gate = deferred<object>();
    const h = rpc.unary<Req, object>('M', (r) => (r.id === 'a' ? gate.promise : Promise.resolve({})), exclusive);
    const a = invoke(h, { id: 'a' });
    expect((await invoke(h, { id: 'b' })).code).toBe('OK');
    gate.resolve({});
    expect((await a).code).toBe('OK');
  });

  it.each([
    ['succeeded', (g: ReturnType<typeof deferred<object>>) => g.resolve({}), 'OK'],
    ['failed', (g: ReturnType<typeof deferred<object>>) => g.reject(new Error('boom')), 'INTERNAL'],
  ] as const)('the key is free again once the call has %s', async (_, settle, code) => {
    const { rpc } = rpcWithLog();
    const gate = deferred<object>();
    let calls = 0;
    const h = rpc.unary<Req, object>('M', () => (++calls === 1 ? gate.promise : Promise.resolve({})), exclusive);
    const first = invoke(h, { id: 'v' });
    settle(gate);
    expect((await first).code).toBe(code);
    expect((await invoke(h, { id: 'v' })).code).toBe('OK');
    expect(calls).toBe(2);
  });

  it('read-only calls (no exclusiveOn) never abort one another', async () => {
    const { rpc } = rpcWithLog();
    const gate = deferred<object>();
    const h = rpc.unary<Req, object>('ControllerGetVolume', () => gate.promise);
    const both = [invoke(h, { id: 'v' }), invoke(h, { id: 'v' })];
    gate.resolve({});
    expect((await Promise.all(both)).map((a) => a.code)).toEqual(['OK', 'OK']);
  });
});

describe('one log line per call: method, subject, result code, at a level that fits the outcome', () => {
  const describeIt = { describe: (r: { id: string }) => ({ volumeId: r.id }) };

  it.each([
    ['OK is info', async () => ({}), 'info', 'OK'],
    ['a refusal is a warning', async () => Promise.reject(new TwinvolError('FailedPrecondition', 'held')), 'warn', 'FAILED_PRECONDITION'],
    ['INTERNAL is an error', async () => Promise.reject(new Error('bug')), 'error', 'INTERNAL'],
  ] as const)('%s', async (_, handler, level, code) => {
    const { rpc, lines } = rpcWithLog();
    await invoke(rpc.unary<{ id: string }, object>('ControllerPublishVolume', handler, describeIt), { id: 'v1' });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level, msg: 'rpc', method: 'ControllerPublishVolume', volumeId: 'v1', code });
    expect(typeof lines[0]!.durationMs).toBe('number');
    expect('message' in lines[0]!).toBe(code !== 'OK');
  });

  it('a caller-sized subject is clipped to 256 characters in the log', async () => {
    const { rpc, lines } = rpcWithLog();
    await invoke(rpc.unary<{ id: string }, object>('M', async () => ({}), describeIt), { id: 'x'.repeat(4096) });
    expect(lines[0]!.volumeId).toBe(`${'x'.repeat(256)}...`);
  });

  it('an aborted call is logged too, and does not free the key of the call that holds it', async () => {
    const { rpc, lines } = rpcWithLog();
    const gate = deferred<object>();
    let calls = 0;
    const h = rpc.unary<{ id: string }, object>('M', () => (++calls === 1 ? gate.promise : Promise.resolve({})), { exclusiveOn: (r) => r.id });
    const first = invoke(h, { id: 'v' });
    expect((await invoke(h, { id: 'v' })).code).toBe('ABORTED');
    expect((await invoke(h, { id: 'v' })).code).toBe('ABORTED');
    gate.resolve({});
    await first;
    expect(lines.map((l) => l.code)).toEqual(['ABORTED', 'ABORTED', 'OK']);
    expect(calls).toBe(1);
  });
});
