// The CSI server: one long-running process serving Identity plus Controller and/or Node over a unix
// socket. Start-up stays lean (node:util parseArgs, no yargs) because liveness probes and restarts
// wait on it.
import { loadConfig, Logger, stderrSink } from '../shared/index.js';
import { parseFlags, USAGE } from './flags.js';
import { type RunningServer, startServer } from './server.js';
import { VENDOR_VERSION } from './version.js';

const log = new Logger(stderrSink, { component: 'twinvol-csi' });

function exitWithUsage(message: string): never {
  process.stderr.write(`twinvol-csi: ${message}\n${USAGE}`);
  process.exit(2);
}

async function main(): Promise<void> {
  let flags;
  let config;
  try {
    flags = parseFlags(process.argv.slice(2), process.env);
    if (flags.help) {
      process.stdout.write(USAGE);
      return;
    }
    config = loadConfig(process.env, flags.overrides);
  } catch (err) {
    exitWithUsage(err instanceof Error ? err.message : String(err));
  }
  const server: RunningServer = await startServer({
    socketPath: flags.socketPath,
    config,
    log,
    exec: flags.exec,
    settings: {
      driverName: flags.driverName,
      vendorVersion: VENDOR_VERSION,
      mode: flags.mode,
      nodeId: config.nodeName,
      maxVolumesPerNode: flags.maxVolumesPerNode,
    },
  });
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    server.stop().then(
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
