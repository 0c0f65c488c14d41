import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { type ConfigOverrides, DATA_ROOT_SCOPES, DEFAULT_CSI_DRIVER_NAME, DEFAULT_PLUGIN_DIR, LOG_LEVELS, type LogLevel, parseDriverName, validateCsiDriverName, validateTimeoutMs } from '../shared/index.js';
import type { Mode } from './context.js';
import { socketPathOf } from './endpoint.js';

// The examples name the port deploy/ serves metrics on: 9808 is the livenessprobe sidecar's, in the same
// pod's network namespace (deploy/node.yaml), so a copied example would keep the server from starting.
const METRICS_EXAMPLES = '0.0.0.0:9810, [::1]:9810, :9810';

export const USAGE = `Usage: twinvol-csi --endpoint unix:///path/csi.sock [options]

  --endpoint <ep>              unix:///path or an absolute path (default: $CSI_ENDPOINT)
  --mode controller|node|all   services to serve (default: all)
  --node-id <id>               this node's name as kubelet knows it (spec.nodeName); required by
                               --mode node and all, unless TWINVOL_NODE_NAME is set
  --driver-name <name>         plugin name (default: csi.twinvol.io)
  --max-volumes-per-node <n>   reported by NodeGetInfo and enforced at ControllerPublish (default: 0, no limit)
  --data-root <dir>            catalog and volume data (TWINVOL_DATA_ROOT)
  --data-root-scope shared|node
                               shared: every node sees the data root (the default); node: it is this
                               node's own, and volumes report it as their accessible_topology
  --data-root-on-network true|false
                               true: the data root is a network filesystem mounted on every node;
                               changes answer UNAVAILABLE while it lies on a local one (not mounted)
                               (default: the config's dataRootOnNetwork, false)
  --state-dir <dir>            node-scope records (TWINVOL_STATE_DIR)
  --kubelet-dir <dir>          kubelet root; targets must lie below it (TWINVOL_KUBELET_DIR)
  --backends all|exec          exec: serve only the volumes of one FlexVolume driver (--flex-driver),
                               advertising exactly what its init reports (default: all)
  --flex-driver <vendor/name>  the FlexVolume driver volumes without a "driver" key belong to
  --flex-plugin-dir <dir>      where FlexVolume drivers live, as kubelet's --volume-plugin-dir
                               (default: /usr/libexec/kubernetes/kubelet-plugins/volume/exec)
  --flex-timeout-ms <n>        deadline of each driver call (default: the config's commandTimeoutMs)
  --flex-lenient <vendor/name> read that driver's replies leniently (the last JSON object); repeatable
  --flex-inline <vendor/name>  let pods use that driver through CSI inline volumes, whose options the
                               pod's author writes (default: none); repeatable
  --flex-exec local|host       run drivers here, or in pid 1's namespaces (nsenter) (default: local)
  --log-level <level>          trace, debug, info, warn or error (default: info); Probe and the
                               capability calls are logged at debug
  --metrics-address <host:port>
                               serve Prometheus metrics at http://<host:port>/metrics (default: off;
                               e.g. ${METRICS_EXAMPLES}; the last: every interface)
  -h, --help                   this text
  --version                    print the version
`;

/** A mistake on the command line: reported on stderr with exit code 2. */
export class UsageError extends Error {}

export interface Flags {
  help: boolean;
  version: boolean;
  socketPath: string;
  mode: Mode;
  driverName: string;
  maxVolumesPerNode: number;
  /** Handed to loadConfig; --node-id becomes the node name the core records attachments under. */
  overrides: ConfigOverrides;
  /** Third-party FlexVolume drivers (shared/backends/exec*.ts). */
  exec: ExecFlags;
  logLevel: LogLevel;
  /** Absent: no metrics endpoint. */
  metricsAddress?: ListenAddress;
}

/** Where the metrics endpoint listens; no host: every interface. */
export interface ListenAddress {
  host?: string;
  port: number;
}

export interface ExecFlags {
  /** --backends exec: this server fronts one driver and nothing else. */
  only: boolean;
  driver?: string;
  pluginDir: string;
  /** Undefined: the config's commandTimeoutMs. */
  timeoutMs?: number;
  lenient: string[];
  /** Drivers whose volumes may be CSI inline volumes (csi/exec-service.ts says why only these). */
  inline: string[];
  execIn: 'local' | 'host';
}

const MODES: readonly Mode[] = ['controller', 'node', 'all'];
const MAX_SOCKET_PATH_BYTES = 107;

/** A flag's digits as their number; anything else as NaN, which every number check refuses. */
function digits(value: string | undefined): number {
  return value !== undefined && /^[0-9]{1,16}$/.test(value) ? Number(value) : Number.NaN;
}

/** A core check's refusal (an InvalidArgument) as a usage error: exit 2 and its one line. */
function asUsage<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

export function parseFlags(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Flags {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        endpoint: { type: 'string' },
        mode: { type: 'string', default: 'all' },
        'node-id': { type: 'string' },
        'driver-name': { type: 'string', default: DEFAULT_CSI_DRIVER_NAME },
        'max-volumes-per-node': { type: 'string', default: '0' },
        'data-root': { type: 'string' },
        'data-root-scope': { type: 'string' },
        'data-root-on-network': { type: 'string' },
        'state-dir': { type: 'string' },
        'kubelet-dir': { type: 'string' },
        backends: { type: 'string', default: 'all' },
        'flex-driver': { type: 'string' },
        'flex-plugin-dir': { type: 'string', default: DEFAULT_PLUGIN_DIR },
        'flex-timeout-ms': { type: 'string' },
        'flex-lenient': { type: 'string', multiple: true, default: [] },
        'flex-inline': { type: 'string', multiple: true, default: [] },
        'flex-exec': { type: 'string', default: 'local' },
        'log-level': { type: 'string', default: 'info' },
        'metrics-address': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
        version: { type: 'boolean', default: false },
      },
    }));
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const { help, version } = values;
  const endpoint = values.endpoint ?? env.CSI_ENDPOINT;
  if (!endpoint && !help && !version) throw new UsageError('--endpoint (or CSI_ENDPOINT) is required');
  const mode = values.mode as Mode;
  if (!MODES.includes(mode)) throw new UsageError(`--mode must be one of ${MODES.join(', ')}`);
  asUsage(() => validateCsiDriverName(values['driver-name'], '--driver-name'));
  const scope = values['data-root-scope'];
  const dataRootScope = scope === undefined ? undefined : DATA_ROOT_SCOPES.find((s) => s === scope);
  if (scope !== undefined && !dataRootScope) throw new UsageError(`--data-root-scope must be one of ${DATA_ROOT_SCOPES.join(', ')}`);
  const onNetwork = values['data-root-on-network'];
  if (onNetwork !== undefined && onNetwork !== 'true' && onNetwork !== 'false') throw new UsageError('--data-root-on-network must be true or false');
  const max = values['max-volumes-per-node'];
  if (!/^[0-9]{1,9}$/.test(max)) throw new UsageError('--max-volumes-per-node must be a whole number');
  const logLevel = LOG_LEVELS.find((l) => l === values['log-level']);
  if (!logLevel) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
  const metrics = values['metrics-address'];
  const socketPath = endpoint ? asUsage(() => socketPathOf(endpoint)) : '';
  // sun_path holds 108 bytes with its terminating NUL; a longer path cannot be bound at all.
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES)
    throw new UsageError(`--endpoint socket path is ${Buffer.byteLength(socketPath)} bytes; a unix socket path holds at most ${MAX_SOCKET_PATH_BYTES}`);
  return {
    help,
    version,
    socketPath,
    exec: execFlags(values),
    mode,
    driverName: values['driver-name'],
    maxVolumesPerNode: Number(max),
    logLevel,
    ...(metrics !== undefined ? { metricsAddress: parseListenAddress(metrics, '--metrics-address') } : {}),
    overrides: {
      nodeName: values['node-id'],
      dataRoot: values['data-root'],
      dataRootScope,
      dataRootOnNetwork: onNetwork === undefined ? undefined : onNetwork === 'true',
      stateDir: values['state-dir'],
      kubeletDir: values['kubelet-dir'],
    },
  };
}

/** A DNS name: labels of letters, digits and inner hyphens, dot-separated. */
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** `host:port`, `[ipv6]:port` or `:port` (every interface); port 0 lets the kernel choose. */
export function parseListenAddress(value: string, flag: string): ListenAddress {
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*)):([0-9]{1,5})$/.exec(value);
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  // A name whose last label is all digits is an IPv4 address to the resolver, or nothing: 1.2.3 and
  // 999.999.999.999 passed as names, and the server exited 1 on ENOTFOUND or EADDRNOTAVAIL.
  const hostOk = host !== undefined && (m?.[1] !== undefined ? isIP(host) === 6 : host === '' || isIP(host) === 4 || (HOST_NAME.test(host) && !/(?:^|\.)[0-9]+$/.test(host)));
  if (!m || !hostOk || port > 65535)
    throw new UsageError(`${flag} must be host:port with a port from 0 to 65535 (e.g. ${METRICS_EXAMPLES}), not ${JSON.stringify(value)}`);
  return { ...(host ? { host } : {}), port };
}

function execFlags(values: { backends: string; 'flex-driver'?: string; 'flex-plugin-dir': string; 'flex-timeout-ms'?: string; 'flex-lenient': string[]; 'flex-inline': string[]; 'flex-exec': string }): ExecFlags {
  if (values.backends !== 'all' && values.backends !== 'exec') throw new UsageError('--backends must be all or exec');
  const only = values.backends === 'exec';
  const driver = values['flex-driver'];
  if (only && driver === undefined) throw new UsageError('--backends exec needs --flex-driver <vendor>/<name>');
  const named = (v: string, flag: string) => asUsage(() => parseDriverName(v, flag).full);
  const dir = values['flex-plugin-dir'];
  if (!dir.startsWith('/')) throw new UsageError('--flex-plugin-dir must be an absolute path');
  const timeout = values['flex-timeout-ms'] === undefined ? undefined : asUsage(() => validateTimeoutMs(digits(values['flex-timeout-ms']), 100, '--flex-timeout-ms'));
  const execIn = values['flex-exec'];
  if (execIn !== 'local' && execIn !== 'host') throw new UsageError('--flex-exec must be local or host');
  return {
    only,
    ...(driver !== undefined ? { driver: named(driver, '--flex-driver') } : {}),
    pluginDir: dir.replace(/\/+$/, '') || '/',
    ...(timeout !== undefined ? { timeoutMs: timeout } : {}),
    lenient: values['flex-lenient'].map((v) => named(v, '--flex-lenient')),
    inline: values['flex-inline'].map((v) => named(v, '--flex-inline')),
    execIn,
  };
}

/**
 * A node server records attachments and registers topology under its node id; one that guessed the
 * host name (which need not be kubelet's node name) would answer for a node that is not there.
 * Checked after every other flag and the config, so a more specific mistake is reported first.
 */
export function requireNodeId(flags: Flags, env: Readonly<Record<string, string | undefined>>): void {
  if (flags.mode !== 'controller' && !flags.overrides.nodeName && !env.TWINVOL_NODE_NAME)
    throw new UsageError(`--mode ${flags.mode} needs --node-id (kubelet's node name, e.g. from the downward API's spec.nodeName) or TWINVOL_NODE_NAME`);
}
