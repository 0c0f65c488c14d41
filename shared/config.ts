import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { posix } from 'node:path';
import { errnoCode, invalidArgument, TwinvolError } from './errors.js';
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
  /** Deadline for each external command but those below. */
  commandTimeoutMs: number;
  /**
   * Deadline for a tool that walks a volume's data (mkfs, fsck, e2fsck, resize2fs, cp of a clone or a
   * snapshot): its time grows with the volume, and kubelet gives its own fsck and mkfs none.
   */
  dataCommandTimeoutMs: number;
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
  // Six hours: a copy of 1 TiB at 100 MiB/s takes three.
  dataCommandTimeoutMs: 21_600_000,
  staticSourceRoots: [],
};

const ENV_KEYS = {
  TWINVOL_DATA_ROOT: 'dataRoot',
  TWINVOL_STATE_DIR: 'stateDir',
  TWINVOL_KUBELET_DIR: 'kubeletDir',
  TWINVOL_NODE_NAME: 'nodeName',
} as const;

type Env = Readonly<Record<string, string | undefined>>;

/** Settings a caller passes on top of the file and the environment (CSI flags): checked like the file's. */
export type ConfigOverrides = Partial<Omit<Config, 'nodeName'>> & { nodeName?: string };

/**
 * Where each setting came from, for a refusal to name (`config file /etc/twinvol/config.json`,
 * `TWINVOL_DATA_ROOT`): an operator mends the file or the variable, so the line says which. A caller's
 * overrides have none; the caller names its own flags.
 */
type Origins = Record<string, string>;

/**
 * Built-in defaults, then the config file (TWINVOL_CONFIG or /etc/twinvol/config.json; missing is
 * fine), then single-value environment overrides. kubelet gives the executable a bare environment,
 * which is why the file exists at all.
 */
export function loadConfig(env: Env = process.env, overrides: ConfigOverrides = {}): Config {
  const path = env.TWINVOL_CONFIG || DEFAULT_CONFIG_PATH;
  const file = readConfigFile(path, Boolean(env.TWINVOL_CONFIG));
  const merged: Record<string, unknown> = { ...DEFAULTS, nodeName: hostname(), ...file };
  const origins: Origins = {};
  for (const key of Object.keys(file)) origins[key] = `config file ${path}`;
  for (const [envKey, key] of Object.entries(ENV_KEYS)) {
    const v = env[envKey];
    if (v) [merged[key], origins[key]] = [v, envKey];
  }
  for (const [k, v] of Object.entries(overrides)) if (v !== undefined) [merged[k], origins[k]] = [v, ''];
  return checkConfig(merged, origins);
}

function readConfigFile(path: string, explicit: boolean): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' && !explicit) return {};
    throw invalidArgument(`cannot read config file ${path}: ${errnoCode(err) ?? String(err)}`);
  }
  return parseConfigText(text, `config file ${path}`);
}

/**
 * A config's text checked as loadConfig checks it, defaults filled in and no environment applied:
 * `twinvol install flex --config` refuses a bad config before writing anything. `what` names the
 * text in a refusal (`config file /x.json`, `--config`).
 */
export function checkConfigText(text: string, what: string): Config {
  return checkFileSettings(parseConfigText(text, what), what);
}

/**
 * The config file at `path` checked as the FlexVolume executable reads it under kubelet (a bare
 * environment: the file over the defaults, a missing file the defaults alone): `twinvol install flex`
 * refuses to put a driver in place beside one that does not load, which would answer every call
 * with Failure.
 */
export function checkConfigFile(path: string): Config {
  return checkFileSettings(readConfigFile(path, false), `config file ${path}`);
}

function checkFileSettings(file: Record<string, unknown>, what: string): Config {
  return checkConfig({ ...DEFAULTS, nodeName: hostname(), ...file }, Object.fromEntries(Object.keys(file).map((k) => [k, what])));
}

function parseConfigText(text: string, what: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw invalidArgument(`${what} is not valid JSON ${jsonErrorAt(text, err)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw invalidArgument(`${what} must hold a JSON object`);
  const known = new Set<string>([...Object.keys(DEFAULTS), 'nodeName']);
  for (const key of Object.keys(parsed)) if (!known.has(key)) throw invalidArgument(`${what}: unknown setting ${quoted(key, 64)}`);
  return parsed as Record<string, unknown>;
}

/**
 * Where and why JSON.parse refused `text`: "at line L, column C (reason)". V8 names the position of
 * most errors, not of an unexpected token; there the shortest prefix that fails short of its own end
 * is where it lies (a prefix before the error is a valid start of JSON, which fails only at its end).
 */
function jsonErrorAt(text: string, err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const failsWithin = (n: number): boolean => {
    try {
      JSON.parse(text.slice(0, n));
      return false;
    } catch (e) {
      const m = e instanceof Error ? e.message : '';
      const at = /at position (\d+)/.exec(m);
      return !m.startsWith('Unexpected end') && (!at || Number(at[1]) < n);
    }
  };
  let index = Number(/at position (\d+)/.exec(message)?.[1] ?? -1);
  if (index < 0) {
    let [lo, hi] = [0, text.length];
    if (!failsWithin(hi)) index = text.length;
    else {
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (failsWithin(mid)) hi = mid;
        else lo = mid;
      }
      index = hi - 1;
    }
  }
  const lines = text.slice(0, index).split('\n');
  // V8's words without the position (given as line and column) or its copy of the text, and with no
  // character that would break the line or hide (a byte-order mark) left unescaped.
  const reason = message
    .replace(/ at position \d+$/, '')
    .replace(/ in JSON$|, .*is not valid JSON$/s, '')
    .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `at line ${lines.length}, column ${(lines.at(-1) ?? '').length + 1} (${reason})`;
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

function flag(value: unknown, key: string): boolean {
  if (typeof value !== 'boolean') throw invalidArgument(`setting ${key} must be true or false`);
  return value;
}

function checkConfig(raw: Record<string, unknown>, origins: Origins): Config {
  // A refused setting says where it was set, and which setting it is where the check's own words do not.
  const setting = <T>(key: string, check: (value: unknown) => T): T => {
    try {
      return check(raw[key]);
    } catch (err) {
      const where = origins[key];
      if (!where || !(err instanceof TwinvolError)) throw err;
      throw invalidArgument(`${where}: ${err.message.includes(key) ? err.message : `setting ${key}: ${err.message}`}`);
    }
  };
  return {
    dataRoot: setting('dataRoot', (v) => absoluteDir(v, 'dataRoot')),
    dataRootScope: setting('dataRootScope', dataRootScope),
    dataRootOnNetwork: setting('dataRootOnNetwork', (v) => flag(v, 'dataRootOnNetwork')),
    stateDir: setting('stateDir', (v) => absoluteDir(v, 'stateDir')),
    kubeletDir: setting('kubeletDir', (v) => absoluteDir(v, 'kubeletDir')),
    nodeName: setting('nodeName', (v) => validateNodeName(v, 'setting nodeName')),
    flexAttach: setting('flexAttach', (v) => flag(v, 'flexAttach')),
    defaultFsType: setting('defaultFsType', (v) => validateBlockFsType(v, 'ext4')),
    commandTimeoutMs: setting('commandTimeoutMs', (v) => validateTimeoutMs(v, 1000, 'setting commandTimeoutMs')),
    dataCommandTimeoutMs: setting('dataCommandTimeoutMs', (v) => validateTimeoutMs(v, 1000, 'setting dataCommandTimeoutMs')),
    staticSourceRoots: setting('staticSourceRoots', (v) => absoluteDirs(v, 'staticSourceRoots')),
  };
}
