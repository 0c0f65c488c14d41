import { parentPort } from 'node:worker_threads';
import { asTwinvolError, blockingFileCallsWhile, errnoCode, loadConfig, type Log, setNativeMountPath, spawnNatively, spawnOffThread } from '../shared/index.js';
import { parseFlags } from './flags.js';
import { GrpcStatus } from './grpc-status.js';
import { createLog } from './logging.js';
import type { Metrics, MetricsEndpoint } from './metrics.js';
import { invokeUnary } from './rpc.js';
import { settingsOf } from './context.js';
import { type OpenServices, openServices } from './services.js';
import { type FromService, HEARTBEAT_MS, parseToService } from './thread-messages.js';

/**
 * The CSI server's service thread (csi/service-thread.ts starts it): the core, every service's
 * handlers, the metrics and their endpoint. Its record reads and writes, locks and mounts block this
 * thread, never the main one, which goes on reading the socket and answering Probe.
 */
export function runServiceThread(): void {
  const port = parentPort;
  if (!port) throw new Error('runServiceThread runs in a worker thread only');
  // Forwarded calls not yet answered, counted with the main thread (csi/service-thread.ts): every
  // answer, whatever path gives it, is one call less. The shared count arrives with `start`, the
  // first message; until then nothing is forwarded and this stands in for it.
  let unanswered: Int32Array = new Int32Array(1);
  const send = (m: FromService) => {
    if (m.type === 'answer') Atomics.sub(unanswered, 0, 1);
    port.postMessage(m);
  };
  // A bug that escapes every handler: as the main thread would (csi/server-main.ts), the message only.
  const die = (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    send({ type: 'failed', message: `fatal: ${message}` });
    process.exit(1);
  };
  process.on('uncaughtException', die);
  process.on('unhandledRejection', die);
  // Nothing is done before the main thread has checked the flags and says start (csi/server-main.ts).
  let serving: Serving | undefined;
  port.on('message', (raw: unknown) => {
    const m = parseToService(raw);
    if (m.type === 'start') {
      unanswered = m.unanswered;
      setNativeMountPath(m.nativeMount);
      // A call served alone makes its file calls on this thread; with others forwarded (being served,
      // or still queued behind a blocking call, which this thread cannot see), they overlap their
      // waits on libuv's threadpool (shared/fs-async.ts). Background work (sweeps) counts as alone.
      blockingFileCallsWhile(() => Atomics.load(unanswered, 0) <= 1);
      void begin(m.argv, send).then((begun) => {
        if (!begun) return;
        // Serving before the main thread hears so: its first call may be the next message.
        serving = begun.serving;
        send(begun.ready);
        // Unref'd: the port's listener is what keeps the thread alive, until it is stopped.
        setInterval(() => send({ type: 'alive' }), HEARTBEAT_MS).unref();
      });
    } else if (m.type === 'call') {
      // The main thread forwards nothing before `ready`; should it, the call is answered, not lost.
      if (serving) serving.call(m.id, m.service, m.method, m.request);
      else send({ type: 'answer', id: m.id, error: { code: GrpcStatus.UNAVAILABLE, details: 'the CSI server is still starting; try again' } });
    }
    else if (m.type === 'observe') serving?.metrics?.observeCall(m.method, m.code, m.seconds);
    else void Promise.resolve(serving?.close()).finally(() => send({ type: 'stopped' }));
  });
}

interface Serving {
  metrics?: Metrics;
  call(id: number, service: string, method: string, request: unknown): void;
  close(): Promise<void>;
}

/** The server's start-up, as it was before the service thread: undefined (and a `failed` sent) if it cannot serve. */
async function begin(argv: string[], send: (m: FromService) => void): Promise<{ serving: Serving; ready: FromService } | undefined> {
  // The main thread checked these already: parsed again here from the same argv and environment.
  const flags = parseFlags(argv, process.env);
  const config = loadConfig(process.env, flags.overrides);
  const log: Log = createLog(flags.logLevel);
  // Tools start by posix_spawn, here (shared/spawn-native.ts); without the addon's, on a thread of
  // their own, since libuv's spawn blocks its thread while it forks (shared/spawn-thread.ts).
  spawnNatively(spawnOffThread);

  let metrics: Metrics | undefined;
  let endpoint: MetricsEndpoint | undefined;
  if (flags.metricsAddress) {
    // prom-client is loaded only here: a server without --metrics-address never evaluates it.
    const m = await import('./metrics.js');
    metrics = new m.Metrics();
    try {
      endpoint = await m.serveMetrics(metrics, flags.metricsAddress);
    } catch (err) {
      send({ type: 'failed', message: `cannot serve metrics on ${m.addressText(flags.metricsAddress)}: ${errnoCode(err) ?? asTwinvolError(err).message}` });
      return undefined;
    }
    log.info('serving metrics', { url: endpoint.url, port: endpoint.port });
  }

  let open: OpenServices;
  try {
    open = await openServices({ config, log, exec: flags.exec, ...(metrics ? { metrics } : {}), settings: settingsOf(flags, config) });
  } catch (err) {
    send({ type: 'failed', message: `cannot start: ${asTwinvolError(err).message}` });
    return undefined;
  }
  const { services } = open;
  const methods = Object.fromEntries(Object.entries(services).map(([name, handlers]) => [name, Object.keys(handlers ?? {})]));
  const serving: Serving = {
    ...(metrics ? { metrics } : {}),
    call(id, service, method, request) {
      const handler = services[service as keyof typeof services]?.[method];
      if (!handler) return send({ type: 'answer', id, error: { code: GrpcStatus.UNIMPLEMENTED, details: `${service}.${method} is not served here` } });
      void invokeUnary(handler, request).then((answer) => send({ type: 'answer', id, ...answer }));
    },
    async close() {
      open.close();
      await endpoint?.close();
    },
  };
  return { serving, ready: { type: 'ready', tools: open.tools, methods } };
}
