import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, realpathSync, renameSync, rmdirSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, normalize } from 'node:path';
import { checkConfigFile, checkConfigText, type Core, errnoCode, failedPrecondition, NATIVE_MOUNT_FILE } from '../shared/index.js';
import { withNodeShebang } from './node-shebang.js';
import { BESIDE_SUFFIX, isSea } from './packed-modules.js';

/** kubelet's --volume-plugin-dir default: where it probes for `<vendor>~<driver>/<driver>`. */
export const DEFAULT_FLEX_PLUGIN_DIR = '/usr/libexec/kubernetes/kubelet-plugins/volume/exec';
export const DEFAULT_VENDOR = 'twinvol';
const DRIVER = 'twinvol';

/**
 * A vendor becomes half of kubelet's plugin name `<vendor>/twinvol` and of the directory
 * `<vendor>~twinvol`: no "~" or "/", and not dot-named, or kubelet's probe would skip it.
 */
const VENDOR = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export interface InstallTarget {
  pluginDir: string;
  vendor: string;
}

/** Checks the flags of install and uninstall; a message for a usage error, or the target. */
export function installTarget(pluginDir: string, vendor: string): InstallTarget | string {
  if (!isAbsolute(pluginDir) || pluginDir.includes('\0') || normalize(pluginDir) !== pluginDir.replace(/(.)\/+$/, '$1'))
    return `--plugin-dir ${JSON.stringify(pluginDir.slice(0, 80))} must be an absolute, normalised path`;
  // Else mkdir's ENAMETOOLONG, exit 1, after the command line was taken as good.
  if (Buffer.byteLength(pluginDir) > 4095 || pluginDir.split('/').some((name) => Buffer.byteLength(name) > 255))
    return `--plugin-dir ${JSON.stringify(pluginDir.slice(0, 80))}... is longer than Linux allows (a path of 4095 bytes, a name of 255)`;
  if (!VENDOR.test(vendor)) return `--vendor ${JSON.stringify(vendor.slice(0, 80))} must be 1 to 63 letters, digits, ".", "_" or "-", starting with a letter or digit`;
  return { pluginDir: pluginDir.replace(/(.)\/+$/, '$1'), vendor };
}

export const driverDir = (t: InstallTarget) => join(t.pluginDir, `${t.vendor}~${DRIVER}`);
export const driverPath = (t: InstallTarget) => join(driverDir(t), DRIVER);

/**
 * The file this process runs from: a single executable application is its own file; a bundle is
 * the script Node was given (process.argv[1]), through any symlinks, as Node resolves it to load it:
 * its modules file is beside the real file (flex/packed-modules.ts), not beside a link to it.
 */
export function runningExecutable(): string {
  if (isSea()) return process.execPath;
  const script = process.argv[1];
  if (!script) throw new Error('cannot tell which file this executable runs from');
  return realpathSync(script);
}

/**
 * `--config` is JSON text (it starts with "{") or a file holding it; checked as the executable will
 * read it, so a bad config is refused before anything is written. Returns the text to install, or a
 * usage message.
 */
export function configText(value: string): string | { error: string } {
  let text = value;
  let source = '--config';
  if (!value.trimStart().startsWith('{')) {
    try {
      text = readFileSync(value, 'utf8');
      source = `config file ${value}`;
    } catch (err) {
      return { error: `--config ${JSON.stringify(value.slice(0, 80))} is neither JSON nor a readable file (${errnoCode(err) ?? String(err)})` };
    }
  }
  try {
    checkConfigText(text, source);
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
  return text.endsWith('\n') ? text : `${text}\n`;
}

/**
 * Without `--config`, install keeps the config already at `path` as it is, and the installed driver
 * reads it on every kubelet call: one that does not load (not JSON, an unknown setting, a bad value)
 * would have it answer every call with Failure. Checked as the executable checks it
 * (shared/config.ts), before anything is placed; a usage message naming the file and where it is
 * wrong, or undefined when it loads (or there is none: the defaults). The file is never rewritten
 * here: what it should say is the operator's to decide (or to give with --config).
 */
export function existingConfigError(path: string): string | undefined {
  try {
    checkConfigFile(path);
    return undefined;
  } catch (err) {
    return `${err instanceof Error ? err.message : String(err)}: nothing installed, as the driver would answer every kubelet call with Failure (mend the file, or give --config)`;
  }
}

export interface Placed {
  path: string;
  /** False: the file already held exactly this content and mode, and was left alone. */
  changed: boolean;
}

/**
 * Puts `content` at `path` so that a reader never sees a partial or non-executable file: kubelet
 * probes the plugin directory on every change and may run the driver at any moment. Written to a
 * dot-named temporary file in the same directory (same filesystem, so the rename is atomic; a dot
 * name, so a probe does not take it for a driver), fsynced, given its mode, renamed over the old
 * file, and the directory fsynced so the rename survives a crash. The same content and mode already
 * there is left alone: no rewrite, no probe event.
 */
export function placeFile(path: string, content: Buffer, mode: number): Placed {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  if (sameFile(path, content, mode)) return { path, changed: false };
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  let open = true;
  try {
    for (let off = 0; off < content.length; ) off += writeSync(fd, content, off, content.length - off);
    fsyncSync(fd);
    fchmodSync(fd, mode);
    open = false;
    closeSync(fd);
    renameSync(tmp, path);
  } catch (err) {
    if (open) closeSync(fd);
    try {
      unlinkSync(tmp);
    } catch {
      // never created, or already renamed
    }
    throw err;
  }
  fsyncDir(dir);
  return { path, changed: true };
}

function sameFile(path: string, content: Buffer, mode: number): boolean {
  try {
    const st = lstatSync(path);
    return st.isFile() && (st.mode & 0o7777) === mode && st.size === content.length && readFileSync(path).equals(content);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

function fsyncDir(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export interface InstallResult {
  driver: Placed;
  /** The bundle's file of operator modules beside it; a single executable has none (flex/packed-modules.ts). */
  modules?: Placed;
  /** The mount addon beside it (shared/native-mount.ts), when the running executable has one beside it. */
  addon?: Placed;
  config?: Placed;
}

/**
 * `twinvol install flex`: the config, then the running executable into kubelet's plugin directory.
 * The config goes first: a config that cannot be written leaves nothing installed, and kubelet never
 * runs the new driver with the old config (or none). A bundle's file beside it (`<executable>.modules`, the commands kubelet never runs) goes first, so
 * the driver placed after it never names a file that is not there; a single executable carries its
 * own, and one left by an earlier bundle install is removed after the driver is replaced. With
 * `node`, a bundle's first line names that Node instead of asking env for one on PATH.
 */
export function installFlex(target: InstallTarget, source: string, o: { config?: { text: string; path: string }; node?: string } = {}): InstallResult {
  const { config } = o;
  // Made first: a first line that cannot be rewritten is refused before anything is placed.
  const driverBytes = driverContent(source, o.node);
  const placedConfig = config ? placeFile(config.path, Buffer.from(config.text), 0o644) : undefined;
  // Whether to bring a file beside is what the running executable is, not whether such a file is
  // lying there: a bundle runs this very command from its own, a single executable reads none.
  const besideSource = isSea() ? undefined : `${source}${BESIDE_SUFFIX}`;
  const besideTarget = `${driverPath(target)}${BESIDE_SUFFIX}`;
  const modules = besideSource ? placeFile(besideTarget, readFileSync(besideSource), 0o644) : undefined;
  // The mount addon, if this executable has one: without it the driver mounts through mount(8).
  const addonTarget = join(driverDir(target), NATIVE_MOUNT_FILE);
  const addonContent = readIfPresent(join(dirname(source), NATIVE_MOUNT_FILE));
  const addon = addonContent ? placeFile(addonTarget, addonContent, 0o755) : undefined;
  const driver = placeFile(driverPath(target), driverBytes, 0o755);
  if (!besideSource) removeIfPresent(besideTarget);
  if (!addonContent) removeIfPresent(addonTarget);
  return { driver, ...(modules ? { modules } : {}), ...(addon ? { addon } : {}), ...(placedConfig ? { config: placedConfig } : {}) };
}

/** The bundle as installed: its first line naming `node`, or env without it (flex/node-shebang.ts). */
function driverContent(source: string, node: string | undefined): Buffer {
  return withNodeShebang(readFileSync(source), node);
}

function readIfPresent(path: string): Buffer | undefined {
  try {
    return readFileSync(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/** True if `path` was there and is now gone. */
function removeIfPresent(path: string): boolean {
  try {
    unlinkSync(path);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

/**
 * `twinvol uninstall flex`: refused while this node has twinvol volumes mounted (its mount records),
 * whose teardown kubelet would then have no driver for, unless forced. The driver's directory goes
 * too once empty, so kubelet's probe forgets the plugin. The config file stays: the CSI server and
 * the CLI read it too.
 */
export async function uninstallFlex(core: Core, target: InstallTarget, force: boolean): Promise<{ path: string; removed: boolean; mounts: number }> {
  const mounts = await core.nodeState.listAll();
  if (mounts.length && !force) {
    const named = [...new Set(mounts.map((m) => m.volumeId))];
    throw failedPrecondition(
      `${mounts.length} twinvol mount${mounts.length === 1 ? ' is' : 's are'} still in place on this node (volume${named.length === 1 ? '' : 's'} ${named.slice(0, 5).join(', ')}${named.length > 5 ? ', ...' : ''}); kubelet needs the driver to tear ${mounts.length === 1 ? 'it' : 'them'} down (--force removes it anyway)`,
    );
  }
  const path = driverPath(target);
  const removed = removeIfPresent(path);
  // After the driver, so that a driver still in place never misses the commands kept beside it.
  removeIfPresent(`${path}${BESIDE_SUFFIX}`);
  removeIfPresent(join(driverDir(target), NATIVE_MOUNT_FILE));
  const dir = driverDir(target);
  try {
    // Our own temporary files, left by an install that was killed, then the directory if that empties it.
    for (const name of readdirSync(dir)) if ([`.${DRIVER}.`, `.${NATIVE_MOUNT_FILE}.`].some((p) => name.startsWith(p)) && name.endsWith('.tmp')) unlinkSync(join(dir, name));
    rmdirSync(dir);
  } catch (err) {
    if (!['ENOENT', 'ENOTEMPTY', 'EEXIST'].includes(errnoCode(err) ?? '')) throw err;
  }
  return { path, removed, mounts: mounts.length };
}
