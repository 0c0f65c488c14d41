import type { sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import { Worker } from 'node:worker_threads';
import { nativeMountBeside } from '../shared/index.js';
import type { CallObserver } from './rpc.js';
import type { ServiceTable } from './services.js';
import { type FromService, HEARTBEAT_MS, parseFromService, type ToService } from './thread-messages.js';
import type { ToolReport } from './tools.js';

declare const __TWINVOL_SERVICE_THREAD__: string;
/**
 * The service thread's program (csi/service-thread-worker.ts), bundled on its own and put here as a
 * string by the build (scripts/build.mjs, an esbuild define). V8 scans a string literal without
 * parsing what it holds, so the main thread does not parse the core, nor the service thread grpc-js;
 * and a single executable, which has no script file to point a worker at, carries it as it is.
 */
const SERVICE_THREAD_SOURCE = __TWINVOL_SERVICE_THREAD__;

/**
 * How long the service thread may go without a word before Probe fails: ten of its heartbeats. Its
 * event loop stops only when a call blocks it (a synchronous file call on a data root whose network
 * filesystem stopped answering, say); CPU starvation slows both threads alike.
 */
export const STALL_MS = 10 * HEARTBEAT_MS;

/**
 * The CSI server's service thread, seen from the main thread. The main thread keeps the socket:
 * grpc-js, the decoding and encoding of every message, and the calls that need no core (Probe). Every
 * other call goes to the service thread, which runs the core (csi/service-thread-worker.ts).
 *
 * Why: with every call on one thread, a Probe waited behind whatever other calls had queued, since
 * each reads and writes its records, takes its locks and spawns its tools on that thread. While 16
 * lifecycles ran, its p99 was 35 ms against the bare grpc-js server's 17 (scripts/bench/csi-scale.mjs),
 * and a liveness probe that waits too long restarts a healthy server. A call crosses the boundary as
 * its decoded request and comes back as its reply or gRPC error: two messages, plain objects only
 * (csi/definition.ts decodes int64 as strings, so nothing needs a prototype).
 */
export class ServiceThread {
  private readonly pending = new Map<number, sendUnaryData<unknown>>();
  private nextId = 0;
  /** Calls forwarded and not yet answered, shared with the thread (csi/service-thread-worker.ts). */
  private readonly unanswered = new Int32Array(new SharedArrayBuffer(4));
  private stopped: (() => void) | undefined;
  private ready: { tools: ToolReport; methods: Record<string, string[]> } | undefined;
  /** Settles when the thread serves, or fails before it does (its code did not load, its start-up failed). */
  private readonly serving: Promise<void>;
  /** Told of the first failure once the thread serves: the process cannot answer calls without it. */
  private onFailure: ((message: string) => void) | undefined;
  private failure: string | undefined;
  private settle!: { resolve: () => void; reject: (err: Error) => void };
  /** When the thread last said anything (performance.now()). */
  private lastHeard = performance.now();

  private constructor(private readonly worker: Worker) {
    this.serving = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
    // A failure before start() is asked for is reported by start(), not as an unhandled rejection.
    this.serving.catch(() => undefined);
    worker.on('message', (raw: unknown) => this.receive(parseFromService(raw)));
    worker.on('error', (err) => this.failed(`fatal: ${err.message}`));
    worker.on('exit', (code) => {
      if (this.stopped) this.stopped();
      else this.failed(`the service thread ended (exit code ${code})`);
    });
  }

  /**
   * The first failure only: a thread that says why it failed (`failed`) then also ends, and its end
   * says less.
   */
  private failed(message: string): void {
    if (this.failure !== undefined) return;
    this.failure = message;
    if (this.ready) this.onFailure?.(message);
    else this.settle.reject(new Error(message));
  }

  /**
   * Starts the thread at once, before the main thread loads what it runs itself: the thread parses
   * its program meanwhile and then waits for `start`.
   */
  static spawn(): ServiceThread {
    const thread = new ServiceThread(newWorker());
    // Until it is started, the thread does not keep the process alive (`--help` exits). After the
    // constructor: a 'message' listener added to a Worker refs it again.
    thread.worker.unref();
    return thread;
  }

  /**
   * Sets the thread to work with the server's argv (checked by the main thread already) and waits until
   * it serves, or rejects with the line that says why it cannot. `onFailure` is told if the thread
   * ends later: the process cannot answer calls without it.
   */
  async start(argv: readonly string[], onFailure: (message: string) => void): Promise<this> {
    this.onFailure = onFailure;
    this.worker.ref();
    // The service thread runs source text, with no file of its own to look beside: it is told.
    this.post({ type: 'start', argv: [...argv], unanswered: this.unanswered, nativeMount: nativeMountBeside(__filename) });
    await this.serving;
    return this;
  }

  /** The start-up tool check, which the main thread's Probe answers from. */
  get tools(): ToolReport {
    return this.ready?.tools ?? { missing: [], missingOptional: [] };
  }

  /**
   * Every service the server offers: each method the thread serves goes to it (every core call, and
   * with --backends exec the driver's plugin capabilities), the rest are `local`'s (Identity).
   */
  table(local: ServiceTable): ServiceTable {
    const table: ServiceTable = { ...local };
    for (const [service, names] of Object.entries(this.ready?.methods ?? {})) {
      const name = service as keyof ServiceTable;
      table[name] = { ...local[name], ...Object.fromEntries(names.map((method) => [method, this.forwarder(service, method)])) };
    }
    return table;
  }

  /** Call metrics of the calls the main thread answers itself, kept with the rest on the thread. */
  readonly observe: CallObserver = (method, code, seconds) => this.post({ type: 'observe', method, code, seconds });

  /**
   * Once no call is in flight (the socket is closed): the metrics endpoint is closed and the thread
   * ends. Settles too if the thread has ended already, or ends before it answers.
   */
  async stop(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.stopped = resolve;
      if (this.worker.threadId < 0) resolve();
      else this.post({ type: 'stop' });
    });
    await this.worker.terminate();
  }

  private forwarder(service: string, method: string) {
    return (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      const id = this.nextId++;
      this.pending.set(id, callback);
      Atomics.add(this.unanswered, 0, 1);
      this.post({ type: 'call', id, service, method, request: call.request });
    };
  }

  /**
   * Why the server cannot serve now, if it cannot: the service thread has said nothing for STALL_MS,
   * so every call but Identity's would wait. Probe fails with it (csi/identity.ts), as it would have
   * when one thread did everything and a stuck call held it, so that a liveness probe still sees it.
   */
  readonly stalled = (): string | undefined => {
    const silentMs = performance.now() - this.lastHeard;
    if (!this.ready || silentMs < STALL_MS) return undefined;
    return `the service thread has answered nothing for ${Math.round(silentMs / 1000)} s (${this.pending.size} call(s) waiting): a call is stuck, probably in a file call on the data root or state dir`;
  };

  private receive(m: FromService): void {
    this.lastHeard = performance.now();
    if (m.type === 'alive') return;
    if (m.type === 'ready') {
      this.ready = { tools: m.tools, methods: m.methods };
      return this.settle.resolve();
    }
    // Said before it ends (a bug escaped), or instead of serving (start-up failed, the thread waits).
    if (m.type === 'failed') return this.failed(m.message);
    if (m.type === 'stopped') return this.stopped?.();
    const callback = this.pending.get(m.id);
    this.pending.delete(m.id);
    if (m.error) callback?.(m.error, null);
    else callback?.(null, m.reply);
  }

  private post(m: ToService): void {
    this.worker.postMessage(m);
  }
}

/**
 * The service thread's young generation, capped: with V8's default (semi-spaces that double under
 * load, up to 16 MiB each) it grew for a few thousand lifecycles before it held, and the server's RSS
 * with it. Capped, the RSS held from 500 lifecycles on, about 20 MiB lower, with no loss of
 * throughput or more CPU per lifecycle (docs/benchmarks.md, "The service thread's young generation").
 */
const YOUNG_GENERATION_MB = 8;

/** The service thread, running its program (eval: the program is a string, not a file). */
function newWorker(): Worker {
  return new Worker(SERVICE_THREAD_SOURCE, { eval: true, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
}
