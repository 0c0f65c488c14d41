import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { loadPackageDefinition, Server, type ServerUnaryCall, type ServiceClientConstructor, ServerCredentials, type sendUnaryData } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterEach, describe, expect, it } from 'vitest';
import { PROTO_PATH } from '../csi/helpers/client.js';
import { FLEX_BIN, runAdmin } from '../helpers/flex-runner.js';
import { killIfRunning, leftovers, useVerifyWorld } from './verify-world.js';

/**
 * A CSI server that takes calls and never answers (wedged, or stopped by a debugger) must not hold
 * `twinvol migrate verify` forever: each call has a deadline, and a signal ends the pending call so the
 * teardown follows at once (flex/compare/csi-server.ts call and cancel, flex/migrate/verify.ts).
 * The server here is a grpc-js server in this process whose handlers never call back, at --csi-endpoint.
 */
const world = useVerifyWorld();
let child: ChildProcess | undefined;
let server: Server | undefined;

afterEach(async () => {
  // Without the deadline the verify would wait forever: ended here so the world's clean-up can run.
  await killIfRunning(child);
  child = undefined;
  server?.forceShutdown();
  server = undefined;
  expect(await leftovers(world())).toEqual([]);
});

type Handler = (call: ServerUnaryCall<unknown, unknown>, reply: sendUnaryData<unknown>) => void;
const never: Handler = () => undefined;

/** A CSI server on `socket`: every method of every service never answers unless `answers` has it. */
async function fakeCsi(socket: string, answers: Record<string, Handler>): Promise<Server> {
  const definition = loadSync(PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  const csi = (loadPackageDefinition(definition).csi as { v1: Record<string, ServiceClientConstructor> }).v1;
  const s = new Server();
  for (const name of ['Identity', 'Controller', 'Node']) {
    const service = csi[name]?.service;
    if (!service) throw new Error(`csi.v1.${name} is not in csi.proto`);
    s.addService(service, Object.fromEntries(Object.keys(service).map((m) => [m, answers[m] ?? never])));
  }
  await new Promise<void>((done, fail) => s.bindAsync(`unix://${socket}`, ServerCredentials.createInsecure(), (err) => (err ? fail(err) : done())));
  return s;
}

function spawnVerify(env: Record<string, string>, args: string[]): { exited: Promise<number | null>; out: () => string; err: () => string } {
  const verify = spawn(FLEX_BIN, ['migrate', 'verify', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin', ...env } });
  child = verify;
  let stdout = '';
  let stderr = '';
  verify.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  verify.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return { exited: new Promise((done) => verify.on('close', done)), out: () => stdout, err: () => stderr };
}

describe('migrate verify: a CSI server that never answers', () => {
  it('Probe unanswered: verify fails with one line naming the deadline, touching nothing', { timeout: 120_000 }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'mute-1', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const socket = join(s.root, 'mute.sock');
    server = await fakeCsi(socket, {});
    const v = spawnVerify(s.env, ['mute-1', '--csi-endpoint', `unix://${socket}`]);
    expect(await v.exited).toBe(1);
    expect(v.out()).toBe('');
    expect(v.err().trim().split('\n'), v.err()).toHaveLength(1);
    expect(v.err()).toMatch(/the CSI server did not answer Probe ready: Probe: DEADLINE_EXCEEDED: no answer within \d+ ms/);
  });

  it('a signal while NodePublishVolume waits: the call is cancelled, the teardown runs, exit 1', { timeout: 300_000 }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'mute-2', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const socket = join(s.root, 'mute2.sock');
    const seen: string[] = [];
    const ok =
      (method: string, reply: object = {}): Handler =>
      (_call, cb) => {
        seen.push(method);
        cb(null, reply);
      };
    server = await fakeCsi(socket, {
      Probe: ok('Probe', { ready: { value: true } }),
      ControllerGetCapabilities: ok('ControllerGetCapabilities', { capabilities: [] }),
      NodeGetCapabilities: ok('NodeGetCapabilities', { capabilities: [] }),
      NodeUnpublishVolume: ok('NodeUnpublishVolume'),
      // Never answered: the signal comes while verify waits for it, not before or after.
      NodePublishVolume: () => {
        seen.push('NodePublishVolume');
        child?.kill('SIGTERM');
      },
    });
    const v = spawnVerify(s.env, ['mute-2', '--csi-endpoint', `unix://${socket}`]);
    const code = await v.exited;
    expect(seen.filter((m) => m.startsWith('Node') && m !== 'NodeGetCapabilities'), v.out()).toEqual(['NodePublishVolume', 'NodeUnpublishVolume']);
    expect(code, v.out() + v.err()).toBe(1);
    expect(v.out()).toMatch(/NodePublishVolume +CANCELLED/);
    expect(v.out()).toMatch(/verdict: FAILED: interrupted by SIGTERM/);
    expect(v.out()).not.toMatch(/3\. Rollback/);
    // One line per call: the interrupt stops the run, it does not turn a call that succeeded into a failure.
    const calls = v.out().split('\n').flatMap((l) => /^ {2}\[csi \] (\S+)/.exec(l)?.slice(1) ?? []);
    expect(calls, v.out()).toEqual([...new Set(calls)]);
    expect(calls).toContain('NodeUnpublishVolume');
  });

  it('a signal while the capabilities are asked (a server stopped after the FlexVolume half): "interrupted", exit 1', { timeout: 300_000 }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'mute-3', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const socket = join(s.root, 'mute3.sock');
    server = await fakeCsi(socket, {
      Probe: (_call, cb) => cb(null, { ready: { value: true } }),
      ControllerGetCapabilities: () => child?.kill('SIGINT'),
    });
    const v = spawnVerify(s.env, ['mute-3', '--csi-endpoint', `unix://${socket}`]);
    expect(await v.exited, v.out() + v.err()).toBe(1);
    expect(v.out()).toMatch(/verdict: FAILED: interrupted by SIGINT$/m);
  });

  it('a second signal while the teardown waits: that call is cancelled and the server is called no more', { timeout: 300_000 }, async () => {
    const s = world();
    expect((await runAdmin(s.env, ['volume', 'create', 'mute-4', '--backend', 'dir', '--size', '16Mi'])).exitCode).toBe(0);
    const socket = join(s.root, 'mute4.sock');
    const seen: string[] = [];
    const ok =
      (reply: object = {}): Handler =>
      (call, cb) => {
        seen.push(call.getPath().split('/').pop() ?? '');
        cb(null, reply);
      };
    const signal: Handler = (call) => {
      seen.push(call.getPath().split('/').pop() ?? '');
      child?.kill('SIGTERM');
    };
    server = await fakeCsi(socket, {
      Probe: ok({ ready: { value: true } }),
      ControllerGetCapabilities: ok({ capabilities: [] }),
      NodeGetCapabilities: ok({ capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }] }),
      NodeStageVolume: ok(),
      NodeUnstageVolume: ok(),
      // Neither answers: the first signal comes during the publish, the second during the teardown.
      NodePublishVolume: signal,
      NodeUnpublishVolume: signal,
    });
    const v = spawnVerify(s.env, ['mute-4', '--csi-endpoint', `unix://${socket}`]);
    expect(await v.exited, v.out() + v.err()).toBe(1);
    expect(seen.filter((m) => m.startsWith('Node') && m !== 'NodeGetCapabilities')).toEqual(['NodeStageVolume', 'NodePublishVolume', 'NodeUnpublishVolume']);
    expect(v.out()).toMatch(/NodeUnstageVolume +ERROR +\d+ ms +NodeUnstageVolume: not called: interrupted by SIGTERM/);
    expect(v.out()).toMatch(/verdict: FAILED: interrupted by SIGTERM/);
  });
});
