import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { type DriverRun, type ExecVolume, flexArgv, flexGlobalMountPath, flexPodVolumePath, readMounts, type ReplyOutcome, run, runDriver, secretsInOptions, signalQuietly, validateNodeName, validateTimeoutMs } from '../shared/index.js';
import { addQuirk, formatReport, type Judged, judgeCall, type StepLine, verdictOf } from './check-report.js';

/**
 * `twinvol flex check <driver-file>`: a FlexVolume driver tried as kubelet would run it, before anyone
 * moves it behind twinvol's CSI server (issue 9, item 6). Loaded only for this command: it runs
 * drivers through the exec backend's runner (shared/backends/exec-run.ts, execa), which the kubelet
 * verbs never load (flex/main.ts; scripts/build.mjs packs this file on its own).
 *
 * In a scratch kubelet directory (a temp dir, removed at the end with every mount made in it, whatever
 * happened) it runs `init`, an unknown verb, and the lifecycle (attachable: attach, waitforattach,
 * mountdevice, mount, unmount, unmountdevice, detach; else mount, unmount), each step twice, with
 * kubelet's argv built by the same functions the CSI server uses (flexArgv in
 * shared/backends/exec-volumes.ts). Where a driver answers "Not supported" it does what kubelet does.
 */

export interface CheckOptions {
  driverFile: string;
  options: Record<string, string>;
  attachable: boolean;
  json: boolean;
  timeoutMs: number;
  /** The node attach and detach name, as kubelet names its own: --node, else this host's name. */
  node: string;
}

export const DEFAULT_CHECK_TIMEOUT_MS = 60_000;
const PV = 'flex-check-pv';
const UNKNOWN_VERB = 'twinvol-check-unknown-verb';

/** The checked command line, or the one-line reason it is not usable (exit 2, nothing run). */
export function checkUsage(a: { driver: string; options?: string; attachable: boolean; json: boolean; timeoutMs?: number; node?: string }): CheckOptions | string {
  // resolve('') is the cwd, which was then "driver file  is not a file".
  if (a.driver === '') return 'name the driver file: flex check <driver>';
  // Absolute, as the spawn would otherwise look a bare name up on the PATH rather than in the cwd stat'ed here.
  const driverFile = resolve(a.driver);
  let st;
  try {
    st = statSync(driverFile);
  } catch {
    return `driver file ${a.driver} does not exist`;
  }
  if (!st.isFile()) return `driver file ${a.driver} is not a file`;
  if ((st.mode & 0o111) === 0) return `driver file ${a.driver} is not executable`;
  let options: Record<string, string> = {};
  if (a.options !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(a.options);
    } catch {
      return '--options is not valid JSON';
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || Object.values(parsed).some((v) => typeof v !== 'string'))
      return '--options must be a JSON object of strings (a PV\'s flexVolume.options)';
    options = parsed as Record<string, string>;
  }
  let timeoutMs: number;
  let node: string;
  try {
    timeoutMs = validateTimeoutMs(a.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS, 100, '--timeout-ms');
    // Checked as a node name is everywhere (shared/validate.ts): twinvol's own driver attaches only to
    // its config's nodeName, which on many nodes is not the host name.
    node = a.node === undefined ? hostname() : validateNodeName(a.node, '--node');
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  return { driverFile, options, attachable: a.attachable, json: a.json, timeoutMs, node };
}

/** The driver's name as a PV and --flex-lenient write it: <vendor>/<name> from kubelet's <vendor>~<name>/<name> layout. */
export function driverNameOf(file: string): { vendor: string; name: string; full: string } {
  const name = basename(file);
  const m = /^(.+)~(.+)$/.exec(basename(dirname(file)));
  const vendor = m && m[2] === name ? (m[1] ?? 'vendor') : 'vendor';
  return { vendor, name, full: `${vendor}/${name}` };
}

/** Runs the check and prints the report; the exit code: 0 runs under kubelet as it is, 1 not. */
export async function runCheck(o: CheckOptions): Promise<number> {
  const driver = driverNameOf(o.driverFile);
  const kubeletDir = mkdtempSync(join(tmpdir(), 'twinvol-check-'));
  const checker = new Checker(o, kubeletDir);
  // Left to their default, SIGINT and SIGTERM would end this process with the scratch dir, its mounts and
  // the running driver left behind: stop the run instead, and clean up as after any other run.
  const stop = (signal: NodeJS.Signals) => checker.interrupt(signal);
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  try {
    try {
      await checker.lifecycle(driver);
    } catch (err) {
      if (!(err instanceof Interrupted)) throw err;
    } finally {
      await checker.cleanup();
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  if (checker.interrupted) {
    process.stderr.write(`twinvol flex check: interrupted by ${checker.interrupted}; the driver's processes were killed and ${kubeletDir} unmounted and removed\n`);
    return 1;
  }
  const lines = checker.lines;
  const verdict = verdictOf(lines, driver.full);
  const attachable = checker.attachable;
  if (o.json) process.stdout.write(`${JSON.stringify({ driver: driver.full, file: o.driverFile, attachable, steps: lines, verdict })}\n`);
  else process.stdout.write(formatReport(lines, verdict));
  return verdict.kind === 'kubelet' ? 0 : 1;
}

/** Thrown by the next driver call once the check was interrupted: the lifecycle stops there. */
class Interrupted extends Error {}

class Checker {
  readonly lines: StepLine[] = [];
  attachable = false;
  /** The signal that stopped the run, if one did. */
  interrupted: NodeJS.Signals | undefined;
  /** Every call's output file: a process still holding one was left by the driver, in its group or not. */
  private readonly outputs: OutputFile[] = [];
  /** The process group of the driver call running now. */
  private current: number | undefined;
  /** Process groups of every driver call: what a call left running is killed at the end. */
  private readonly groups = new Set<number>();
  private attached = false;

  constructor(
    private readonly o: CheckOptions,
    private readonly kubeletDir: string,
  ) {}

  /** The steps, up to the first that fails under both readings (what it set up, cleanup() takes down). */
  async lifecycle(driver: { vendor: string; name: string; full: string }): Promise<void> {
    const init = await this.call('init', 'init', []);
    if (!init) return;
    if (init.kind !== 'success') {
      // kubelet's prober drops a plugin whose init is not Success, and twinvol-csi refuses its every call.
      const line = this.lines.at(-1);
      if (line) addQuirk(line, { kind: 'init-not-success', detail: 'init does not answer Success: kubelet does not load the driver and twinvol-csi refuses it', kubelet: false, twinvol: 'no' });
      return;
    }
    const caps = init.status.capabilities;
    this.attachable = caps?.attach ?? false;
    const last = this.lines.at(-1);
    if (last) last.detail += `; attach: ${this.attachable}, requiresFSResize: ${caps?.requiresFSResize ?? false}`;
    if (this.o.attachable && !this.attachable) {
      this.lines.push({ step: 'attachable', result: 'fail', detail: 'checked with --attachable, but init does not report attach: kubelet would never call attach', quirks: [] });
      return;
    }
    await this.twice(UNKNOWN_VERB, 'unknown verb', () => []);
    const volume: ExecVolume = { id: PV, driver, options: this.o.options, fsType: this.o.options['kubernetes.io/fsType'] ?? '' };
    const staging = flexGlobalMountPath(this.kubeletDir, driver, PV);
    const target = flexPodVolumePath(this.kubeletDir, 'flex-check-pod-uid', driver, PV);
    const mountOpts = { readonly: false, stagingPath: staging, pod: { name: 'flex-check-pod', namespace: 'default', uid: 'flex-check-pod-uid', serviceAccount: 'default' } };
    let device = '';
    if (this.attachable) {
      // Attached from the first Success on, so cleanup() detaches even when a repeated attach fails.
      const a = await this.twice('attach', 'attach', () => flexArgv.attach(volume, this.o.node, false), async (outcome) => {
        if (outcome.kind === 'success') this.attached = true;
      });
      if (!a.ok) return;
      device = deviceOf(a.outcome, '');
      const w = await this.twice('waitforattach', 'waitforattach', () => flexArgv.waitforattach(volume, device, false));
      if (!w.ok) return;
      device = deviceOf(w.outcome, device);
      mkdirSync(staging, { recursive: true, mode: 0o750 });
      const md = await this.twice('mountdevice', 'mountdevice', () => flexArgv.mountdevice(volume, staging, device, false), async (outcome) => {
        // attacherDefaults.MountDevice: kubelet mounts the device itself.
        if (outcome.kind === 'not-supported' && device && !mounted(staging)) await run('mount', ['--', device, staging], { timeoutMs: this.o.timeoutMs });
      });
      this.stacked(md.lines, staging);
      if (!md.ok) return;
    }
    mkdirSync(target, { recursive: true, mode: 0o750 });
    const m = await this.twice('mount', 'mount', () => flexArgv.mount(volume, target, mountOpts), async (outcome) => {
      // mounterDefaults: a bind mount from the device mount path (nothing to bind without one).
      if (outcome.kind !== 'not-supported') return;
      if (this.attachable) {
        if (!mounted(target)) await run('mount', ['--bind', '--', staging, target], { timeoutMs: this.o.timeoutMs });
        return;
      }
      const line = this.lines.at(-1);
      if (line) addQuirk(line, { kind: 'nothing-mounted', detail: `mount answered Not supported but the driver is not attachable: there is no device mount to bind, so nothing is mounted at ${target} (kubelet fails the mount)`, kubelet: false, twinvol: 'no' });
    });
    this.stacked(m.lines, target);
    if (!m.ok || m.lines.some((l) => l.result === 'fail')) return;
    await this.teardown('unmount', target, () => flexArgv.unmount(target));
    if (this.attachable) {
      await this.teardown('unmountdevice', staging, () => flexArgv.unmountdevice(staging));
      const d = await this.twice('detach', 'detach', () => flexArgv.detach(volume, this.o.node));
      if (d.ok) this.attached = false;
    }
    const left = mountsUnder(this.kubeletDir);
    const line: StepLine = { step: 'teardown', result: 'pass', detail: left.length ? `${left.length} mounts left` : 'nothing left mounted', quirks: [] };
    if (left.length) addQuirk(line, { kind: 'leftover-mounts', detail: `still mounted after teardown: ${left.join(', ')}`, kubelet: false, twinvol: 'no' });
    this.lines.push(line);
  }

  /** unmount or unmountdevice, twice: a repeat on a path no longer mounted may fail (kubelet removes the directory; twinvol checks the mount table). */
  private async teardown(verb: 'unmount' | 'unmountdevice', path: string, argv: () => string[]): Promise<void> {
    const fallback = async (outcome: ReplyOutcome) => {
      // unmounterDefaults: kubelet unmounts it itself.
      if (outcome.kind === 'not-supported' && mounted(path)) await run('umount', ['--', path], { timeoutMs: this.o.timeoutMs });
    };
    const first = await this.call(`${verb} #1`, verb, argv());
    if (first) await fallback(first);
    const before = mounted(path);
    const second = await this.call(`${verb} #2`, verb, argv());
    const line = this.lines.at(-1);
    if (second) await fallback(second);
    if (line && !second && first && !before && line.quirks.length === 0) {
      line.result = 'quirk';
      line.quirks.push({ kind: 'not-idempotent', detail: `a repeated ${verb} of a path no longer mounted fails (kubelet removes the directory after the first; twinvol checks the mount table first)`, kubelet: true, twinvol: 'ok' });
    }
  }

  /** Two mounts on one path after the repeated call. */
  private stacked(lines: StepLine[], path: string): void {
    const count = readMounts().filter((e) => e.mountPoint === path).length;
    const line = lines.at(-1);
    if (count > 1 && line)
      addQuirk(line, { kind: 'stacked-mount', detail: `${count} mounts on ${path} after the repeated call (kubelet and twinvol both look at the mount table first)`, kubelet: true, twinvol: 'ok' });
  }

  private async twice(verb: string, label: string, argv: () => string[], after?: (o: ReplyOutcome) => Promise<void>) {
    const lines: StepLine[] = [];
    let outcome: ReplyOutcome | undefined;
    let ok = true;
    for (const n of [1, 2]) {
      const o = await this.call(`${label} #${n}`, verb, argv());
      const line = this.lines.at(-1);
      if (line) lines.push(line);
      if (!o) ok = false;
      else {
        outcome ??= o;
        if (after) await after(o);
      }
    }
    return { ok, outcome, lines };
  }

  /** A signal: the call running now is killed, and the lifecycle stops at its next call. */
  interrupt(signal: NodeJS.Signals): void {
    this.interrupted ??= signal;
    if (this.current !== undefined) signalQuietly(-this.current, 'SIGKILL');
  }

  /** One call: run, judge, look for what it left running. Undefined when it failed under both readings. */
  private async call(step: string, verb: string, args: string[]): Promise<ReplyOutcome | undefined> {
    if (this.interrupted) throw new Interrupted(`interrupted by ${this.interrupted}`);
    const onStart = (pid: number) => {
      this.current = pid;
      this.groups.add(pid);
      if (this.interrupted) signalQuietly(-pid, 'SIGKILL');
    };
    let done: DriverRun;
    try {
      done = await runDriver(this.o.driverFile, [verb, ...args], { timeoutMs: this.o.timeoutMs, graceMs: Math.min(2000, this.o.timeoutMs), onStart });
    } finally {
      this.current = undefined;
    }
    if (this.interrupted) throw new Interrupted(`interrupted by ${this.interrupted}`);
    if (done.pid !== undefined) this.groups.add(done.pid);
    const judged: Judged = judgeCall(step, verb, done, this.o.timeoutMs, secretsInOptions(this.o.options));
    this.outputs.push(done.outputFile);
    const holding = done.timedOut ? [] : holdersOf([done.outputFile]);
    if (holding.length)
      addQuirk(judged.line, { kind: 'leftover-processes', detail: `left ${holding.join(', ')} running with its output open: kubelet waits for the output pipe to close and hangs (twinvol reads a file)`, kubelet: false, twinvol: 'ok' });
    this.lines.push(judged.line);
    return judged.outcome;
  }

  /** Whatever happened: unmount what is under the scratch dir, detach what is attached, kill what is left, remove the dir. */
  async cleanup(): Promise<void> {
    const umountAll = async () => {
      for (const path of mountsUnder(this.kubeletDir)) await run('umount', ['--', path], { timeoutMs: this.o.timeoutMs }).catch(() => run('umount', ['-l', '--', path], { timeoutMs: this.o.timeoutMs }));
    };
    try {
      await umountAll();
      if (this.attached) {
        const volume: ExecVolume = { id: PV, driver: driverNameOf(this.o.driverFile), options: this.o.options, fsType: '' };
        await runDriver(this.o.driverFile, ['detach', ...flexArgv.detach(volume, this.o.node)], { timeoutMs: this.o.timeoutMs, graceMs: Math.min(2000, this.o.timeoutMs) });
      }
    } finally {
      for (const group of this.groups) signalQuietly(-group, 'SIGKILL');
      // A daemon that left the group (setsid, a double fork) is found again by the output file it holds.
      for (const pid of holdersOf(this.outputs)) signalQuietly(pid, 'SIGKILL');
      await umountAll().catch(() => undefined);
      rmSync(this.kubeletDir, { recursive: true, force: true });
    }
  }
}

function deviceOf(outcome: ReplyOutcome | undefined, fallback: string): string {
  return outcome?.kind === 'success' && outcome.status.device ? outcome.status.device : fallback;
}

function mounted(path: string): boolean {
  return readMounts().some((m) => m.mountPoint === path);
}

/** Mount points at or below `root`, deepest first (unmounted in that order). */
function mountsUnder(root: string): string[] {
  return readMounts()
    .map((m) => m.mountPoint)
    .filter((p) => p === root || p.startsWith(`${root}/`))
    .sort((a, b) => b.length - a.length);
}

type OutputFile = DriverRun['outputFile'];


/**
 * Live processes, in any group or session, holding one of these output files open (exec-run.ts: an
 * unlinked twinvol-flex-*.out), matched by path and by device and inode: each alone may be another
 * call's (a freed inode number is reused; a path, once unlinked, may be created again).
 */
function holdersOf(files: readonly OutputFile[]): number[] {
  const holders: number[] = [];
  if (!files.length) return holders;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid || zombie(entry)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    const holds = fds.some((fd) => {
      try {
        const path = `/proc/${entry}/fd/${fd}`;
        const target = readlinkSync(path);
        const named = files.filter((f) => target === `${f.path} (deleted)`);
        if (!named.length) return false;
        const st = statSync(path);
        return named.some((f) => f.dev === st.dev && f.ino === st.ino);
      } catch {
        return false;
      }
    });
    if (holds) holders.push(Number(entry));
  }
  return holders;
}

function zombie(pid: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}
