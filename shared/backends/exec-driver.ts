import { stat } from '../fs-async.js';
import { join } from 'node:path';
import { errnoCode, failedPrecondition, internal, TwinvolError } from '../errors.js';
import { type LogFields, secretsInArgument } from '../log.js';
import type { DriverName } from './exec.js';
import { type DriverCapabilities, type DriverStatus, type OutputMode, readReply } from './exec-reply.js';
import { recordSpawn } from '../runner.js';
import { runDriver } from './exec-run.js';
import { scrub, shownOutput } from '../secret-text.js';

/** Where and how the CSI server runs third-party FlexVolume drivers (csi/flags.ts fills it). */
export interface FlexSettings {
  /** kubelet's --volume-plugin-dir: drivers live at DIR/<vendor>~<name>/<name>. */
  pluginDir: string;
  /** Deadline of each driver call. */
  timeoutMs: number;
  /** Drivers whose replies are read leniently (the last JSON object; the rest logged). */
  lenient: readonly string[];
  /** local: run the driver where the server runs; host: in pid 1's namespaces (a containerised node plugin). */
  execIn: 'local' | 'host';
}

export const DEFAULT_PLUGIN_DIR = '/usr/libexec/kubernetes/kubelet-plugins/volume/exec';

/** The reply of a call the driver supports and answered Success. */
export type CallResult = { supported: true; status: DriverStatus } | { supported: false };

/** One line for the operator; `fields` are already scrubbed of secrets. */
export type FlexLog = (level: 'info' | 'warn', message: string, fields: LogFields) => void;

interface Probed {
  /** The file as it was when init ran: mtime, ctime, inode, size. */
  version: string;
  capabilities: DriverCapabilities;
  /** Verbs the driver answered "Not supported" since its last init (kubelet's plugin.unsupported). */
  unsupported: Set<string>;
}

/**
 * The drivers a CSI server fronts, found where kubelet finds them. `init` runs the first time a
 * driver is needed and again whenever its file changes (mtime, ctime, inode or size), as kubelet's
 * prober re-probes on a change in the plugin directory; a verb answered "Not supported" is not asked
 * again until then, as kubelet remembers it.
 */
export class FlexDrivers {
  private readonly probed = new Map<string, Probed>();
  private readonly probing = new Map<string, Promise<Probed>>();

  constructor(
    readonly settings: FlexSettings,
    private readonly log: FlexLog = () => {},
  ) {}

  executable(driver: DriverName): string {
    return join(this.settings.pluginDir, `${driver.vendor}~${driver.name}`, driver.name);
  }

  mode(driver: DriverName): OutputMode {
    return this.settings.lenient.includes(driver.full) ? 'lenient' : 'strict';
  }

  /** What the driver's init reported (run now if the file is new or changed). */
  async capabilities(driver: DriverName): Promise<DriverCapabilities> {
    return (await this.current(driver)).capabilities;
  }

  private async current(driver: DriverName): Promise<Probed> {
    const path = this.executable(driver);
    const version = await fileVersion(path);
    const known = this.probed.get(path);
    if (known?.version === version) return known;
    const key = `${path}@${version}`;
    let pending = this.probing.get(key);
    if (!pending) {
      pending = this.init(driver, version).finally(() => this.probing.delete(key));
      this.probing.set(key, pending);
    }
    return pending;
  }

  private async init(driver: DriverName, version: string): Promise<Probed> {
    const reply = await this.run(driver, 'init', [], []);
    if (reply.kind !== 'success') throw failedPrecondition(`FlexVolume driver ${driver.full}: init ${reply.kind === 'failure' ? `failed: ${reply.message}` : 'answered Not supported'}`);
    const probed: Probed = { version, capabilities: reply.status.capabilities ?? { attach: false, selinuxRelabel: false, supportsMetrics: false, fsGroup: false, requiresFSResize: false }, unsupported: new Set() };
    this.probed.set(this.executable(driver), probed);
    this.log('info', 'FlexVolume driver initialised', { driver: driver.full, capabilities: probed.capabilities });
    return probed;
  }

  /**
   * Runs `<driver> <verb> <args...>`. Success gives the status; "Not supported" is remembered and
   * answered without a run until the driver changes; any failure throws with the driver's message.
   * The secrets the options argument carries (the pod's, as kubernetes.io/secret/<key>, and a password
   * written inline in the PV, which attach and mountdevice get too: shared/log.ts secretsInArgument),
   * and any `given`, are cut, in each form they travel in, out of whatever this puts in a log line or
   * an error (`scrub`; the driver's own text by `shownOutput`).
   */
  async call(driver: DriverName, verb: string, args: readonly string[], given: readonly string[] = []): Promise<CallResult> {
    const probed = await this.current(driver);
    if (probed.unsupported.has(verb)) return { supported: false };
    const secrets = [...given, ...args.flatMap(secretsInArgument)];
    const reply = await this.run(driver, verb, args, secrets);
    if (reply.kind === 'not-supported') {
      probed.unsupported.add(verb);
      return { supported: false };
    }
    if (reply.kind === 'failure') throw new TwinvolError('Internal', `FlexVolume driver ${driver.full}: ${scrub(reply.message, secrets)}`);
    return { supported: true, status: reply.status };
  }

  private async run(driver: DriverName, verb: string, args: readonly string[], secrets: readonly string[]) {
    const { timeoutMs, execIn } = this.settings;
    const prefix = execIn === 'host' ? ['nsenter', '--target', '1', '--mount', '--uts', '--ipc', '--net', '--pid', '--'] : [];
    const executable = this.executable(driver);
    const done = await runDriver(executable, [verb, ...args], { timeoutMs, graceMs: Math.min(2000, timeoutMs), prefix });
    const fields = { driver: driver.full, verb, exitCode: done.exitCode, durationMs: Math.round(done.durationMs) };
    // In the spawn log and the command metrics like twinvol's own tools; failed when it gave no answer or a Failure.
    const record = (failed: boolean) => recordSpawn({ command: executable, args: [verb, ...args.map(withheldOptions)], exitCode: done.exitCode, durationMs: done.durationMs, failed });
    if (done.startError || done.timedOut) record(true);
    if (done.startError) throw failedPrecondition(`FlexVolume driver ${driver.full} could not be run: ${scrub(done.startError, secrets)}${tooBig(done.startError, args)}`);
    if (done.timedOut) {
      this.log('warn', 'FlexVolume driver call passed its deadline; its process group was killed', fields);
      throw internal(`FlexVolume driver ${driver.full}: ${verb} did not answer within ${timeoutMs} ms (killed)`);
    }
    const { outcome, quirks } = readReply(verb, { exitCode: done.exitCode, output: done.output }, this.mode(driver), (text) => shownOutput(text, secrets));
    record(outcome.kind === 'failure');
    if (quirks.length) this.log('warn', 'FlexVolume driver reply read leniently', { ...fields, quirks: quirks.map((q) => scrub(q, secrets)) });
    this.log('info', 'FlexVolume driver call', { ...fields, outcome: outcome.kind });
    return outcome;
  }
}

async function fileVersion(path: string): Promise<string> {
  try {
    const st = await stat(path);
    if (!st.isFile()) throw failedPrecondition(`FlexVolume driver ${path} is not a file`);
    return `${st.mtimeMs}:${st.ctimeMs}:${st.ino}:${st.size}`;
  } catch (err) {
    if (err instanceof TwinvolError) throw err;
    if (errnoCode(err) === 'ENOENT') throw failedPrecondition(`FlexVolume driver ${path} does not exist`);
    throw failedPrecondition(`FlexVolume driver ${path} cannot be read: ${errnoCode(err) ?? String(err)}`);
  }
}

/**
 * Why a start failed with E2BIG, which otherwise reads like a missing driver: the options argument
 * (the volume's attributes and the pod's secrets, base64) past what the kernel takes for one argument
 * (MAX_ARG_STRLEN, 128 KiB), or all of them with the environment past ARG_MAX.
 */
function tooBig(startError: string, args: readonly string[]): string {
  if (!/\bE2BIG\b/.test(startError)) return '';
  const largest = Math.max(0, ...args.map((a) => Buffer.byteLength(a)));
  return ` (its arguments, the largest ${largest} bytes, and its environment are more than the kernel takes for one exec: 128 KiB an argument; the options argument holds the volume's attributes and the pod's secrets)`;
}

/**
 * A driver argument as the spawn log and the metrics' debug line keep it: the JSON options kubelet
 * passes (mount, attach, mountdevice, ...) carry the PV's secrets, so they are left out whole; the
 * verb, paths, device and node names stay.
 */
function withheldOptions(arg: string): string {
  return arg.trimStart().startsWith('{') ? '<options>' : arg;
}
