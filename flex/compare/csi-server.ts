import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { type CallOptions, credentials, makeClientConstructor, type ServiceError, status } from '@grpc/grpc-js';
import { type CsiService, type CsiServiceDefinitions, csiServiceDefinitions } from '../../csi/definition.js';
import protoText from '../../csi/proto/csi.proto';

/** A request or reply as proto-loader would give it (csi/definition.ts LOADER_OPTIONS: field names as written, int64 as strings). */
export type Message = Record<string, unknown>;
type Unary = (req: Message, options: CallOptions, cb: (err: ServiceError | null, res: Message) => void) => Cancellable;
interface Cancellable {
  cancel(): void;
}
interface Closable {
  close(): void;
}

/** A call the server answered with an error: `code` is the gRPC status by name (NOT_FOUND, INTERNAL, ...). */
export class CsiCallError extends Error {
  readonly code: string;
  readonly details: string;

  constructor(method: string, err: ServiceError, deadlineMs: number) {
    const code = typeof err.code === 'number' ? (status[err.code] ?? String(err.code)) : 'UNKNOWN';
    // grpc-js's own text is its resolver's and balancer's timings, which say nothing of the server.
    const details = err.code === status.DEADLINE_EXCEEDED ? `no answer within ${Math.round(deadlineMs)} ms` : (err.details ?? err.message);
    super(`${method}: ${code}: ${details}`);
    this.code = code;
    this.details = details;
  }
}

export interface PrivateCsiOptions {
  /** The twinvol-csi executable. */
  bin: string;
  socketPath: string;
  nodeId: string;
  /** Flags after --endpoint and --node-id (--data-root, --state-dir, --kubelet-dir). */
  args: readonly string[];
  env: Record<string, string>;
  /** How long it may take to answer Probe ready. */
  startMs?: number;
  /** Each call's deadline; default CALL_MS. */
  callMs?: number;
  /**
   * Keep the server's JSON log lines for systemCallsOf: the server is started with --log-level debug,
   * where each mount it makes or undoes as a system call has a line.
   */
  keepLog?: boolean;
}

/** The fields of a log line of twinvol-csi (csi/logging.ts) that systemCallsOf reads. */
interface LogLine {
  msg?: unknown;
  method?: unknown;
  requestId?: unknown;
  call?: unknown;
  error?: unknown;
}

/**
 * Each call's deadline unless the caller gives one: kubelet's own for a CSI call (pkg/volume/csi
 * csiTimeout, two minutes). Without one a server that accepts and never answers holds the caller forever.
 */
const CALL_MS = 120_000;

/** Lines kept for systemCallsOf at most: the oldest go first, so a caller that never asks costs bounded memory. */
const KEPT_LINES = 10_000;

/** csi.proto's services, parsed on the first call of this process's first server. */
let definitions: CsiServiceDefinitions | undefined;

/**
 * A twinvol-csi on a unix socket, called as the CSI sidecars and kubelet call it: one gRPC client per
 * service, one unary call at a time. Either a private server this process starts (and stops), or an
 * operator's server it only connects to (`twinvol migrate verify --csi-endpoint`,
 * flex/migrate/verify-csi.ts).
 */
export class PrivateCsi {
  private readonly clients = new Map<CsiService, Record<string, Unary> & Closable>();
  private readonly stderr: string[] = [];
  /** Log lines not yet read by systemCallsOf; undefined unless started with keepLog. */
  private readonly kept: LogLine[] | undefined;
  private readonly exited: Promise<void>;
  /** Calls sent and not yet answered: what cancel() ends. */
  private readonly pending = new Set<Cancellable>();
  /** Set by cancel(reason, true): every later call fails at once with it. */
  private refusal = '';

  private constructor(
    private readonly socketPath: string,
    private readonly child?: ChildProcess,
    keepLog = false,
    private readonly callMs = CALL_MS,
  ) {
    this.kept = keepLog ? [] : undefined;
    let partial = '';
    child?.stderr?.on('data', (d: Buffer) => {
      const parts = (partial + d.toString()).split('\n');
      partial = parts.pop() ?? '';
      this.stderr.push(...parts);
      if (this.stderr.length > 200) this.stderr.splice(0, this.stderr.length - 200);
      if (this.kept) for (const line of parts) this.keep(line);
    });
    this.exited = child ? new Promise((done) => child.once('exit', () => done())) : Promise.resolve();
  }

  /** The server already listening at `socketPath`, once it answers Probe ready within `startMs`; each later call gets `callMs`. */
  static async connect(socketPath: string, startMs = 10_000, callMs = CALL_MS): Promise<PrivateCsi> {
    const csi = new PrivateCsi(socketPath, undefined, false, callMs);
    try {
      await csi.untilReady(startMs, 'the CSI server');
      return csi;
    } catch (err) {
      await csi.stop();
      throw err;
    }
  }

  /** Starts the server and waits (a readiness poll with a deadline) until Probe answers ready. */
  static async start(o: PrivateCsiOptions): Promise<PrivateCsi> {
    mkdirSync(dirname(o.socketPath), { recursive: true });
    const logLevel = o.keepLog ? ['--log-level', 'debug'] : [];
    const child = spawn(o.bin, ['--endpoint', `unix://${o.socketPath}`, '--node-id', o.nodeId, ...logLevel, ...o.args], { cwd: '/', env: o.env, stdio: ['ignore', 'ignore', 'pipe'] });
    const csi = new PrivateCsi(o.socketPath, child, o.keepLog, o.callMs);
    const spawned = new Promise<void>((done, fail) => {
      child.once('spawn', () => done());
      child.once('error', fail);
    });
    try {
      await spawned;
      await csi.untilReady(o.startMs ?? 20_000, 'twinvol-csi');
      return csi;
    } catch (err) {
      await csi.stop();
      throw err;
    }
  }

  /** A readiness poll with a deadline: the socket is there and Probe says ready (or says nothing). */
  private async untilReady(startMs: number, what: string): Promise<void> {
    const until = performance.now() + startMs;
    let last = 'no socket yet';
    for (;;) {
      const child = this.child;
      if (child && (child.exitCode !== null || child.signalCode !== null)) throw new Error(`${what} exited at start: ${this.lastLines()}`);
      if (existsSync(this.socketPath)) {
        try {
          // Probe's own deadline is what is left of the start's: a server that never answers ends the wait too.
          const probe = await this.call('Identity', 'Probe', {}, Math.max(1, until - performance.now()));
          // An unset ready means ready (the CSI spec's Probe): only an explicit false waits.
          if ((probe.ready as { value?: boolean } | null | undefined)?.value !== false) return;
          last = 'Probe says not ready';
        } catch (err) {
          last = err instanceof Error ? err.message : String(err);
        }
      }
      if (performance.now() > until) throw new Error(`${what} did not answer Probe ready: ${this.child ? this.lastLines() : last}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  private keep(text: string): void {
    const kept = this.kept;
    if (!kept || !text.startsWith('{')) return;
    try {
      const line: unknown = JSON.parse(text);
      if (typeof line === 'object' && line !== null) kept.push(line);
    } catch {
      return;
    }
    if (kept.length > KEPT_LINES) kept.splice(0, kept.length - KEPT_LINES);
  }

  /**
   * The mounts and loop devices the server made or undid as system calls in its latest call of
   * `method` (`mount`, `umount2`, `ioctl`; one the kernel refused as `mount:EINVAL`), from its debug
   * log. Each line of a call carries the call's request id, and the call's own `rpc` line comes last:
   * the thread that ran the call wrote them all, in order, before the reply left (csi/rpc.ts), though
   * this process may read the reply first. So this waits, up to `deadlineMs`, for that rpc line, and
   * takes the system call lines of its request id; the lines up to it are then dropped. Only for a
   * server started with keepLog.
   */
  async systemCallsOf(method: string, deadlineMs = 10_000): Promise<string[]> {
    const kept = this.kept;
    if (!kept) throw new Error('systemCallsOf needs a server started with keepLog');
    const until = performance.now() + deadlineMs;
    for (;;) {
      const end = kept.findIndex((l) => l.msg === 'rpc' && l.method === method);
      const rpc = kept[end];
      if (rpc) {
        const calls = kept.slice(0, end).filter((l) => l.msg === 'system call' && l.requestId === rpc.requestId);
        kept.splice(0, end + 1);
        return calls.map((l) => (typeof l.error === 'string' ? `${String(l.call)}:${l.error}` : String(l.call)));
      }
      if (performance.now() > until) throw new Error(`twinvol-csi logged no rpc line for ${method} within ${deadlineMs} ms: ${this.lastLines()}`);
      await new Promise((r) => setTimeout(r, 2));
    }
  }

  /** The server's last stderr lines (its JSON log), for an error message. */
  lastLines(n = 5): string {
    return this.stderr.slice(-n).join(' | ') || '(no output)';
  }

  private client(service: CsiService): Record<string, Unary> & Closable {
    let c = this.clients.get(service);
    if (!c) {
      const ctor = makeClientConstructor((definitions ??= csiServiceDefinitions(protoText))[service], service);
      c = new ctor(`unix://${this.socketPath}`, credentials.createInsecure()) as unknown as Record<string, Unary> & Closable;
      this.clients.set(service, c);
    }
    return c;
  }

  /**
   * One RPC with a deadline (`deadlineMs`, else the one this client was made with); a failure throws
   * a CsiCallError naming the method, the status code and the server's message.
   */
  call(service: CsiService, method: string, req: Message, deadlineMs = this.callMs): Promise<Message> {
    if (this.refusal) return Promise.reject(new Error(`${method}: not called: ${this.refusal}`));
    const client = this.client(service);
    const fn = client[method];
    if (typeof fn !== 'function') throw new Error(`csi.v1.${service} has no method ${method}`);
    return new Promise((done, fail) => {
      let answered = false;
      let call: Cancellable | undefined;
      call = fn.call(client, req, { deadline: Date.now() + deadlineMs }, (err, res) => {
        answered = true;
        if (call) this.pending.delete(call);
        if (err) fail(new CsiCallError(method, err, deadlineMs));
        else done(res);
      });
      if (!answered) this.pending.add(call);
    });
  }

  /**
   * Ends the calls waiting for an answer (each fails CANCELLED): a caller interrupted need not wait out
   * a deadline before its clean-up. With `further`, every later call fails at once too, for a caller
   * that has given up on the server (its clean-up then goes round it).
   */
  cancel(reason: string, further = false): void {
    if (further) this.refusal = reason;
    for (const call of [...this.pending]) call.cancel();
    this.pending.clear();
  }

  /** SIGTERM (the server removes its socket), SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const late = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(late);
  }

  /** Whether this process started the server (and stop() ends it). */
  get ownsServer(): boolean {
    return this.child !== undefined;
  }
}
