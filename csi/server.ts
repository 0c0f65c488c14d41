import { chmod, rm } from 'node:fs/promises';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { type Config, type Core, DEFAULT_PLUGIN_DIR, ExecVolumes, type Log, observeSpawns, openCore, parseDriverName, registerNode, sweepAbandonedWork, thawAbandonedFreezes } from '../shared/index.js';
import { type ServiceContext, servesController, servesNode, type Settings } from './context.js';
import { controllerService } from './controller.js';
import { ExecService } from './exec-service.js';
import type { ExecFlags } from './flags.js';
import { packageDefinitionFromText, serviceDefinition } from './definition.js';
import { groupControllerService } from './group-controller.js';
import { prepareSocket } from './endpoint.js';
import { identityService } from './identity.js';
import type { Metrics } from './metrics.js';
import { nodeService } from './node.js';
import protoText from './proto/csi.proto';
import { Rpc } from './rpc.js';
import { checkTools, type Role } from './tools.js';
import { nodeTopology } from './topology.js';

export interface ServerOptions {
  socketPath: string;
  settings: Settings;
  config: Config;
  log: Log;
  /** Absent: no --metrics-address; calls and commands are only logged. */
  metrics?: Metrics;
  /** Third-party FlexVolume drivers (--flex-* flags); absent: the defaults, exec volumes routed by their records. */
  exec?: ExecFlags;
}

export interface RunningServer {
  /** Stops taking calls, lets those in flight finish (up to `graceMs`), removes the socket. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * What a killed predecessor left is put right at start-up: a crashed create's partial copy, and a
 * filesystem a group snapshot froze and never thawed. Failing at either never stops the server.
 */
async function sweepWork(core: Core, log: Log): Promise<void> {
  try {
    const report = await sweepAbandonedWork(core);
    if (report.removed.length || report.busy.length || report.foreign.length) log.info('swept abandoned work', { ...report });
  } catch (err) {
    log.warn('could not sweep abandoned work', { error: err instanceof Error ? err.message : String(err) });
  }
  try {
    const thawed = await thawAbandonedFreezes(core);
    if (thawed.length) log.warn('thawed filesystems a killed group snapshot left frozen', { thawed });
  } catch (err) {
    log.error('could not thaw a filesystem a killed group snapshot left frozen', { error: err instanceof Error ? err.message : String(err) });
  }
}

/**
 * The driver caller for exec volumes (shared/backends/exec-volumes.ts), drivers found and run as the
 * flags say: handed to the core as its `flex` port when the server opens it, so that the core's verbs
 * call third-party FlexVolume drivers without importing what runs them.
 */
function flexPortOf(flags: ExecFlags | undefined, config: Config, log: Log): { volumes: ExecVolumes; flags: ExecFlags } {
  const f: ExecFlags = flags ?? { only: false, pluginDir: DEFAULT_PLUGIN_DIR, lenient: [], execIn: 'local' };
  const timeoutMs = f.timeoutMs ?? config.commandTimeoutMs;
  const volumes = new ExecVolumes({ pluginDir: f.pluginDir, timeoutMs, lenient: f.lenient, execIn: f.execIn }, config.commandTimeoutMs, (level, message, fields) => log[level](message, fields));
  return { volumes, flags: f };
}

export async function startServer({ socketPath, settings, config, log, exec, metrics }: ServerOptions): Promise<RunningServer> {
  const roles: Role[] = [...(servesController(settings.mode) ? ['controller' as const] : []), ...(servesNode(settings.mode) ? ['node' as const] : [])];
  const tools = checkTools(roles);
  if (tools.missing.length) log.error('required tools are missing; Probe will fail', { missing: tools.missing });
  if (tools.missingOptional.length) log.warn('optional tools are missing: xfs volumes (mkfs.xfs, xfs_growfs) or group snapshot freezes (fsfreeze) will fail', { missing: tools.missingOptional });

  const flex = flexPortOf(exec, config, log);
  const ctx: ServiceContext = { core: openCore(config, { flex: flex.volumes }), rpc: new Rpc(log, metrics?.observeCall), settings, tools };
  metrics?.countVolumesOf(ctx.core);
  // Every external command: a debug line (within a call, it carries the call's ids: csi/logging-scope.ts) and its metrics.
  const stopObserving = observeSpawns((r) => {
    log.debug('command', { tool: r.command, args: r.args, exitCode: r.exitCode, durationMs: Math.round(r.durationMs), failed: r.failed });
    metrics?.observeCommand(r);
  });
  await sweepWork(ctx.core, log);
  // ControllerPublishVolume to a node that never registered is NOT_FOUND: a node server makes its node
  // known before it serves. A failure here stops the server, since no controller could publish to it.
  if (servesNode(settings.mode)) await registerNode(ctx.core, settings.nodeId, nodeTopology(settings.nodeId).segments, 'csi');
  const definition = packageDefinitionFromText(protoText);
  // Well above any request within REQUEST_LIMITS (shared/validate.ts), well below grpc-js's 4 MiB default.
  const server = new Server({ 'grpc.max_receive_message_length': 1024 * 1024 });
  // Services this mode does not serve are absent, so grpc-js answers their calls UNIMPLEMENTED.
  // Exec volumes take their own path through each service; the rest the built-in one (csi/exec-service.ts).
  const execService = new ExecService(ctx, {
    capabilities: (driver) => flex.volumes.drivers.capabilities(driver),
    only: flex.flags.only,
    ...(flex.flags.driver !== undefined ? { driver: parseDriverName(flex.flags.driver) } : {}),
  });
  server.addService(serviceDefinition(definition, 'Identity'), execService.identity(identityService(ctx)));
  if (servesController(settings.mode)) {
    server.addService(serviceDefinition(definition, 'Controller'), execService.controller(controllerService(ctx)));
    // FlexVolume has no snapshots: a server fronting one driver offers no group controller.
    if (!exec?.only) server.addService(serviceDefinition(definition, 'GroupController'), groupControllerService(ctx));
  }
  if (servesNode(settings.mode)) server.addService(serviceDefinition(definition, 'Node'), execService.node(nodeService(ctx)));

  await prepareSocket(socketPath);
  // The socket is born 0600 (no moment where others could connect), and chmod makes sure of it.
  const umask = process.umask(0o177);
  try {
    await new Promise<number>((resolve, reject) =>
      server.bindAsync(`unix:${socketPath}`, ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
    );
  } finally {
    process.umask(umask);
  }
  await chmod(socketPath, 0o600);
  log.info('serving', { endpoint: `unix://${socketPath}`, mode: settings.mode, nodeId: settings.nodeId, driver: settings.driverName, version: settings.vendorVersion });

  return {
    async stop(graceMs = 10_000) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      stopObserving();
      await rm(socketPath, { force: true });
    },
  };
}
