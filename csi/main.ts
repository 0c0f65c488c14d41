// The CSI server: one long-running process serving Identity plus Controller and/or Node over a unix
// socket. Start-up stays lean (node:util parseArgs, no yargs) because liveness probes and restarts
// wait on it.
import { logVerbosity, setLogger, setLogVerbosity } from '@grpc/grpc-js';
import { asTwinvolError, errnoCode, loadConfig, type Log, spawnOffThread } from '../shared/index.js';
import { type ListenAddress, parseFlags, requireNodeId, USAGE, UsageError } from './flags.js';
import { createLog } from './logging.js';
import type { Metrics, MetricsEndpoint } from './metrics.js';
import { type RunningServer, startServer } from './server.js';
import { VENDOR_VERSION } from './version.js';

// At info until the flags are read (a fatal error before then is still logged), then at --log-level.
let log: Log = createLog('info');

// grpc-js prints its own lines ("E No address added out of total 1 resolved") on stderr; a failed
// start is reported below as one line of ours, and once serving its errors go into our JSON log.
setLogVerbosity(logVerbosity.NONE);

/** A start-up that cannot go on: one line on stderr (the orchestrator shows the last one), then exit. */
function exitWith(code: number, message: string): never {
  process.stderr.write(`twinvol-csi: ${message.replace(/\s+/g, ' ').trim()}\n`);
  process.exit(code);
}

/** grpc-js's "No address added out of total 1 resolved errors: [listen EACCES: ...]", as its reason. */
function startFailure(err: unknown, endpoint: string): string {
  const message = asTwinvolError(err).message;
  const listen = /^No address added out of total \d+ resolved errors: \[(.*)\]$/s.exec(message);
  return listen ? `cannot listen on ${endpoint}: ${listen[1]}` : `cannot start: ${message}`;
}

/**
 * The metrics and their endpoint, bound before the CSI socket so a port in use stops the start with
 * one line. prom-client is loaded only here: a server without --metrics-address never evaluates it.
 */
async function metricsEndpoint(address: ListenAddress): Promise<{ metrics: Metrics; endpoint: MetricsEndpoint }> {
  const { addressText, Metrics, serveMetrics } = await import('./metrics.js');
  const metrics = new Metrics();
  try {
    return { metrics, endpoint: await serveMetrics(metrics, address) };
  } catch (err) {
    exitWith(1, `cannot serve metrics on ${addressText(address)}: ${errnoCode(err) ?? asTwinvolError(err).message}`);
  }
}

async function main(): Promise<void> {
  let flags;
  let config;
  try {
    flags = parseFlags(process.argv.slice(2), process.env);
    if (flags.help || flags.version) {
      process.stdout.write(flags.help ? USAGE : `twinvol-csi ${VENDOR_VERSION}\n`);
      return;
    }
    config = loadConfig(process.env, flags.overrides);
    requireNodeId(flags, process.env);
  } catch (err) {
    const usage = err instanceof UsageError;
    exitWith(2, `${usage ? err.message : asTwinvolError(err).message} (see: twinvol-csi --help)`);
  }
  // Checked before anything is created: otherwise the first mkdir or bind fails with a raw EACCES.
  const uid = process.getuid?.() ?? 0;
  if (uid !== 0) exitWith(1, `must run as root (it mounts filesystems and attaches loop devices); running as uid ${uid}`);
  log = createLog(flags.logLevel);
  // Calls are answered while tools start (shared/spawn-thread.ts): a spawn blocks its thread.
  spawnOffThread();
  const { metrics, endpoint } = flags.metricsAddress ? await metricsEndpoint(flags.metricsAddress) : {};
  if (endpoint) log.info('serving metrics', { url: endpoint.url, port: endpoint.port });
  let server: RunningServer;
  try {
    server = await startServer({
      socketPath: flags.socketPath,
      config,
      log,
      exec: flags.exec,
      ...(metrics ? { metrics } : {}),
      settings: {
        driverName: flags.driverName,
        vendorVersion: VENDOR_VERSION,
        mode: flags.mode,
        nodeId: config.nodeName,
        maxVolumesPerNode: flags.maxVolumesPerNode,
      },
    });
  } catch (err) {
    exitWith(1, startFailure(err, `unix://${flags.socketPath}`));
  }
  setLogger({ error: (...args: unknown[]) => log.error('grpc-js', { message: args.map(String).join(' ') }) });
  setLogVerbosity(logVerbosity.ERROR);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    Promise.all([server.stop(), endpoint?.close()]).then(
      () => process.exit(0),
      (err: unknown) => {
        log.error('shutdown failed', { message: err instanceof Error ? err.message : String(err) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

// A bug that escapes every handler: logged (message only: a stack helps no operator), then exit so the
// orchestrator restarts a clean process rather than one in an unknown state.
const die = (err: unknown) => {
  log.error('fatal', { message: err instanceof Error ? err.message : String(err) });
  process.exit(1);
};
process.on('uncaughtException', die);
process.on('unhandledRejection', die);
main().catch(die);
