import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import { type Config, type Core, DEFAULT_PLUGIN_DIR, ExecVolumes, type Log, observeSpawns, observeSystemCalls, openCore, parseDriverName, redactOptionValues, registerNode, sweepAbandonedWork, thawAbandonedFreezes } from '../shared/index.js';
import { type ServiceContext, servesController, servesNode, type Settings } from './context.js';
import { controllerService } from './controller.js';
import type { CsiService } from './definition.js';
import { ExecService } from './exec-service.js';
import type { ExecFlags } from './flags.js';
import { groupControllerService } from './group-controller.js';
import type { Metrics } from './metrics.js';
import { nodeService } from './node.js';
import { Rpc } from './rpc.js';
import { checkTools, type Role, type ToolReport } from './tools.js';
import { nodeTopology } from './topology.js';

export interface ServicesOptions {
  settings: Settings;
  config: Config;
  log: Log;
  /** Absent: no --metrics-address; calls and commands are only logged. */
  metrics?: Metrics;
  /** Third-party FlexVolume drivers (--flex-* flags); absent: the defaults, exec volumes routed by their records. */
  exec?: ExecFlags;
}

/** The services this mode serves, by name, each a map of method name to handler. */
export type ServiceTable = Partial<Record<CsiService, UntypedServiceImplementation>>;

export interface OpenServices {
  /** What the service thread answers: every call but Identity's, which the main thread answers (csi/server-main.ts). */
  services: ServiceTable;
  /** The start-up tool check, which Probe answers from. */
  tools: ToolReport;
  /** Stops feeding the log and metrics with commands. */
  close(): void;
}

/**
 * What a killed predecessor left is put right at start-up: a crashed create's partial copy, a bind
 * left on its scratch mount point (shared/bind-by-move.ts), and a filesystem a group snapshot froze
 * and never thawed. Failing at any never stops the server.
 */
async function sweepWork(core: Core, log: Log): Promise<void> {
  try {
    const report = await sweepAbandonedWork(core);
    if (report.removed.length || report.busy.length || report.foreign.length) log.info('swept abandoned work', { ...report });
  } catch (err) {
    log.warn('could not sweep abandoned work', { error: err instanceof Error ? err.message : String(err) });
  }
  try {
    const undone = await core.mounter.sweepScratchBinds();
    if (undone.length) log.warn('undid binds a killed call left on their scratch mount points', { undone });
  } catch (err) {
    log.warn('could not undo the scratch binds of a killed call', { error: err instanceof Error ? err.message : String(err) });
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
  const f: ExecFlags = flags ?? { only: false, pluginDir: DEFAULT_PLUGIN_DIR, lenient: [], inline: [], execIn: 'local' };
  const timeoutMs = f.timeoutMs ?? config.commandTimeoutMs;
  const volumes = new ExecVolumes({ pluginDir: f.pluginDir, timeoutMs, lenient: f.lenient, execIn: f.execIn }, (level, message, fields) => log[level](message, fields));
  return { volumes, flags: f };
}

/**
 * Opens the core and builds every service this mode serves, after the start-up sweeps and this
 * node's registration: what the CSI server's service thread runs (csi/service-thread-worker.ts).
 */
export async function openServices({ settings, config, log, exec, metrics }: ServicesOptions): Promise<OpenServices> {
  const roles: Role[] = [...(servesController(settings.mode) ? ['controller' as const] : []), ...(servesNode(settings.mode) ? ['node' as const] : [])];
  const tools = checkTools(roles);
  if (tools.missing.length) log.error('required tools are missing; Probe will fail', { missing: tools.missing });
  if (tools.missingOptional.length) log.warn('optional tools are missing: xfs volumes (mkfs.xfs, xfs_growfs) or group snapshot freezes (fsfreeze) will fail', { missing: tools.missingOptional });

  const flex = flexPortOf(exec, config, log);
  const ctx: ServiceContext = { core: openCore(config, { flex: flex.volumes }), rpc: new Rpc(log, metrics?.observeCall), settings };
  metrics?.countVolumesOf(ctx.core);
  // Every external command, and every mount made as a system call instead: a debug line (within a
  // call, it carries the call's ids: csi/logging-scope.ts) and its metrics.
  const stopSpawns = observeSpawns((r) => {
    // A static volume's mount options may hold a password (CIFS password=, Ceph secret=): cut, as in a failed command's message.
    log.debug('command', { tool: r.command, args: r.args.map(redactOptionValues), exitCode: r.exitCode, durationMs: Math.round(r.durationMs), failed: r.failed });
    metrics?.observeCommand(r);
  });
  const stopSystemCalls = observeSystemCalls((r) => {
    log.debug('system call', { ...r, options: r.options.map(redactOptionValues), durationMs: Number(r.durationMs.toFixed(3)) });
    metrics?.observeSystemCall(r);
  });
  await sweepWork(ctx.core, log);
  // ControllerPublishVolume to a node that never registered is NOT_FOUND: a node server makes its node
  // known before it serves. A failure here stops the server, since no controller could publish to it.
  if (servesNode(settings.mode)) await registerNode(ctx.core, settings.nodeId, nodeTopology(settings.nodeId).segments, 'csi');
  // Services this mode does not serve are absent, so grpc-js answers their calls UNIMPLEMENTED.
  // Exec volumes take their own path through each service; the rest the built-in one (csi/exec-service.ts).
  const execService = new ExecService(ctx, {
    capabilities: (driver) => flex.volumes.drivers.capabilities(driver),
    only: flex.flags.only,
    inline: flex.flags.inline,
    ...(flex.flags.driver !== undefined ? { driver: parseDriverName(flex.flags.driver) } : {}),
  });
  // Identity is the main thread's (csi/server-main.ts), but for what only a driver can tell.
  const identity = execService.identity();
  const services: ServiceTable = identity ? { Identity: identity } : {};
  if (servesController(settings.mode)) {
    services.Controller = execService.controller(controllerService(ctx));
    // FlexVolume has no snapshots: a server fronting one driver offers no group controller.
    if (!exec?.only) services.GroupController = groupControllerService(ctx);
  }
  if (servesNode(settings.mode)) services.Node = execService.node(nodeService(ctx));
  return {
    services,
    tools,
    close: () => {
      stopSpawns();
      stopSystemCalls();
    },
  };
}
