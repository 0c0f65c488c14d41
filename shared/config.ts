import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { posix } from 'node:path';
import { errnoCode, invalidArgument } from './errors.js';
import { type FsType, type NodeId, quoted, validateBlockFsType, validateNodeName, validateTimeoutMs } from './validate.js';

/** Settings shared by the FlexVolume executable, the CLI and the CSI server. */
export interface Config {
  /** Cluster-scoped catalog and volume data. */
  dataRoot: string;
  /**
   * `shared`: every node sees the data root, so any node can hold any volume. `node`: the data root
   * is this node's own, so its volumes live here only, and say so (CSI accessible_topology:
   * shared/core/placement.ts).
   */
  dataRootScope: DataRootScope;
  /**
   * The data root is a network filesystem mounted on every node: nothing in the catalog is changed
   * while it lies on a local one, i.e. while that filesystem is not mounted
   * (shared/store/network-catalog.ts).
   */
  dataRootOnNetwork: boolean;
  /** Node-scoped records (tmpfs in production, so a reboot clears them with the mounts they describe). */
  stateDir: string;
  /** Targets and staging paths must lie below this root. */
  kubeletDir: string;
  /** This node's name, as kubelet and the controller-manager name it. */
  nodeName: NodeId;
  /** FlexVolume attach capability, chosen at install time. */
  flexAttach: boolean;
  defaultFsType: FsType;
  /** Deadline for each external command. */
  commandTimeoutMs: number;
  /**
   * Host directories under which a static volume's source may lie when a PV or StorageClass writer
   * (FlexVolume options, CSI parameters) chose it; empty: only the administrator's CLI may (see
   * shared/static-source.ts).
   */
  staticSourceRoots: string[];
}

export const DATA_ROOT_SCOPES = ['shared', 'node'] as const;
export type DataRootScope = (typeof DATA_ROOT_SCOPES)[number];

export const DEFAULT_CONFIG_PATH = '/etc/twinvol/config.json';

const DEFAULTS: Omit<Config, 'nodeName'> = {
  dataRoot: '/var/lib/twinvol',
  dataRootScope: 'shared',
  dataRootOnNetwork: false,
  stateDir: '/run/twinvol',
  kubeletDir: '/var/lib/kubelet',
  flexAttach: true,
  defaultFsType: 'ext4',
  commandTimeoutMs: 120_000,
  staticSourceRoots: [],
};

const ENV_KEYS = {
  TWINVOL_DATA_ROOT: 'dataRoot',
  TWINVOL_STATE_DIR: 'stateDir',
  TWINVOL_KUBELET_DIR: 'kubeletDir',
  TWINVOL_NODE_NAME: 'nodeName',
} as const;

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Built-in defaults, then the config file (TWINVOL_CONFIG or /etc/twinvol/config.json; missing is
 * fine), then single-value environment overrides. kubelet gives the executable a bare environment,
 * which is why the file exists at all.
 */
/** Settings a caller passes on top of the file and the environment (CSI flags): checked like the file's. */
export type ConfigOverrides = Partial<Omit<Config, 'nodeName'>> & { nodeName?: string };

export function loadConfig(env: Env = process.env, overrides: ConfigOverrides = {}): Config {
  const file = readConfigFile(env.TWINVOL_CONFIG || DEFAULT_CONFIG_PATH, Boolean(env.TWINVOL_CONFIG));
  const merged: Record<string, unknown> = { ...DEFAULTS, nodeName: hostname(), ...file };
  for (const [envKey, key] of Object.entries(ENV_KEYS)) {
    const v = env[envKey];
    if (v) merged[key] = v;
  }
  for (const [k, v] of Object.entries(overrides)) if (v !== undefined) merged[k] = v;
  return checkConfig(merged);
}

function readConfigFile(path: string, explicit: boolean): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' && !explicit) return {};
    throw invalidArgument(`cannot read config file ${path}: ${errnoCode(err) ?? String(err)}`);
  }
  return parseConfigText(text, path);
}

/**
 * A config file's text checked as loadConfig checks it, defaults filled in and no environment
 * applied: `twinvol install flex --config` refuses a bad config before writing anything.
 */
export function checkConfigText(text: string, path: string): Config {
  return checkConfig({ ...DEFAULTS, nodeName: hostname(), ...parseConfigText(text, path) });
}

function parseConfigText(text: string, path: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalidArgument(`config file ${path} is not valid JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw invalidArgument(`config file ${path} must hold a JSON object`);
  const known = new Set<string>([...Object.keys(DEFAULTS), 'nodeName']);
  for (const key of Object.keys(parsed)) if (!known.has(key)) throw invalidArgument(`config file ${path}: unknown setting ${quoted(key, 64)}`);
  return parsed as Record<string, unknown>;
}

function absoluteDir(value: unknown, key: string): string {
  if (typeof value !== 'string' || !posix.isAbsolute(value) || value.includes('\0') || value.split('/').includes('..'))
    throw invalidArgument(`setting ${key} must be an absolute path`);
  const trimmed = value.replace(/\/+$/, '');
  if (trimmed === '') throw invalidArgument(`setting ${key} must not be /`);
  return trimmed;
}

function absoluteDirs(value: unknown, key: string): string[] {
  if (!Array.isArray(value) || value.length > 64) throw invalidArgument(`setting ${key} must be a list of at most 64 absolute paths`);
  return value.map((v, i) => absoluteDir(v, `${key}[${i}]`));
}

function dataRootScope(value: unknown): DataRootScope {
  const scope = DATA_ROOT_SCOPES.find((s) => s === value);
  if (!scope) throw invalidArgument(`setting dataRootScope must be one of ${DATA_ROOT_SCOPES.join(', ')}`);
  return scope;
}

function checkConfig(raw: Record<string, unknown>): Config {
  if (typeof raw.flexAttach !== 'boolean') throw invalidArgument('setting flexAttach must be true or false');
  if (typeof raw.dataRootOnNetwork !== 'boolean') throw invalidArgument('setting dataRootOnNetwork must be true or false');
  const timeout = validateTimeoutMs(raw.commandTimeoutMs, 1000, 'setting commandTimeoutMs');
  return {
    dataRoot: absoluteDir(raw.dataRoot, 'dataRoot'),
    dataRootScope: dataRootScope(raw.dataRootScope),
    dataRootOnNetwork: raw.dataRootOnNetwork,
    stateDir: absoluteDir(raw.stateDir, 'stateDir'),
    kubeletDir: absoluteDir(raw.kubeletDir, 'kubeletDir'),
    nodeName: validateNodeName(raw.nodeName, 'setting nodeName'),
    flexAttach: raw.flexAttach,
    defaultFsType: validateBlockFsType(raw.defaultFsType, 'ext4'),
    commandTimeoutMs: timeout,
    staticSourceRoots: absoluteDirs(raw.staticSourceRoots, 'staticSourceRoots'),
  };
}
