// The CSI server's main thread (csi/main.ts starts it): the flags, the socket and Identity. Start-up
// stays lean (node:util parseArgs, no yargs) because liveness probes and restarts wait on it.
import { logVerbosity, setLogger, setLogVerbosity } from '@grpc/grpc-js';
import { asTwinvolError, loadConfig, type Log } from '../shared/index.js';
import { settingsOf } from './context.js';
import { parseFlags, requireNodeId, USAGE, UsageError } from './flags.js';
import { identityService } from './identity.js';
import { createLog } from './logging.js';
import { Rpc } from './rpc.js';
import { type RunningServer, serveSocket } from './server.js';
import type { ServiceThread } from './service-thread.js';
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

export async function main(spawned: ServiceThread): Promise<void> {
  process.on('uncaughtException', die);
  process.on('unhandledRejection', die);
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
  const settings = settingsOf(flags, config);
  // The core, the services and the metrics endpoint, on a thread of their own (csi/service-thread.ts),
  // which opens them while this thread parses csi.proto (csi/server.ts): one after the other, they
  // made the cold start about 60 ms longer.
  const ready = spawned.start(process.argv.slice(2), (message) => die(new Error(message))).catch((err: unknown) => exitWith(1, asTwinvolError(err).message));
  const services = ready.then((thread) => {
    // Identity needs no core, so this thread answers it: a Probe never waits for the service thread.
    // The calls this thread answers are counted with the rest where the metrics are served, on the
    // service thread; without metrics nothing is posted, or each Probe would wake that thread for naught.
    const observe = flags.metricsAddress ? thread.observe : undefined;
    return thread.table({ Identity: identityService({ config, rpc: new Rpc(log, observe), settings, tools: thread.tools, stalled: thread.stalled }) });
  });
  let server: RunningServer;
  try {
    server = await serveSocket({ socketPath: flags.socketPath, settings, log, services });
  } catch (err) {
    exitWith(1, startFailure(err, `unix://${flags.socketPath}`));
  }
  const thread = await ready;
  setLogger({ error: (...args: unknown[]) => log.error('grpc-js', { message: args.map(String).join(' ') }) });
  setLogVerbosity(logVerbosity.ERROR);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    server.stop().then(() => thread.stop()).then(
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

