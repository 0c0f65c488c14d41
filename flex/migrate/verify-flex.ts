import { mkdirSync, rmdirSync } from 'node:fs';
import { type ExecVolume, flexArgv, flexGlobalMountPath, flexPodVolumePath, mountAt, type ReplyOutcome, run } from '../../shared/index.js';
import { kubeletCall } from '../compare/kubelet-flex.js';
import { attempt, type Recorder } from './verify-report.js';

/**
 * The FlexVolume half of `twinvol migrate verify`: a volume brought up and torn down as kubelet and the
 * controller-manager would, by running the driver file once per call with kubelet's argv (flexArgv,
 * shared/backends/exec-volumes.ts, the same function the CSI server's exec backend and `twinvol flex
 * check` use) and reading each reply with kubelet's rules (readReply, strict). Where a driver answers
 * "Not supported", kubelet's default runs here (pkg/volume/flexvolume attacher-defaults.go,
 * mounter-defaults.go, unmounter-defaults.go). Every mount is read-only: verifying must not change
 * what it verifies.
 */

/** The volume as a FlexVolume PV names it; `volume.id` is the PV name (kubernetes.io/pvOrVolumeName). */
export interface FlexSubject {
  /** The driver executable: twinvol's own file, or <plugin-dir>/<vendor>~<name>/<name>. */
  file: string;
  volume: ExecVolume;
}

export interface Brought {
  /** Where the pod sees the volume. */
  path: string;
  /** The device the attach gave (attachable drivers that have one), else "". */
  device: string;
}

const POD_UID = '7a1e0c5e-7e1f-4c1a-9c3b-0d0e0e1f0a01';

export class KubeletFlex {
  private attached = false;
  /** What the driver's init said of attach; undefined until it ran. */
  private attachable: boolean | undefined;
  readonly staging: string;
  readonly target: string;

  constructor(
    private readonly subject: FlexSubject,
    /** A scratch kubelet root (under the configured kubelet dir: drivers check that). */
    root: string,
    private readonly node: string,
    private readonly timeoutMs: number,
    private readonly rec: Recorder,
  ) {
    const { vendor, name } = subject.volume.driver;
    // kubelet's layout (shared/kubelet-paths.ts), under verify's scratch kubelet root.
    this.staging = flexGlobalMountPath(root, { vendor, name }, subject.volume.id);
    this.target = flexPodVolumePath(root, POD_UID, { vendor, name }, subject.volume.id);
  }

  async up(): Promise<Brought> {
    const v = this.subject.volume;
    // kubelet runs init when it probes the plugin dir, not for every pod: once here too.
    if (this.attachable === undefined) {
      const init = await this.call('init', []);
      if (init.kind !== 'success') throw new Error(`the driver's init did not succeed: ${describe(init)}`);
      // kubelet's defaults when init leaves a capability out (driver-call.go): attach true.
      this.attachable = init.status.capabilities?.attach ?? true;
    }
    const attachable = this.attachable;
    let device = '';
    if (attachable) {
      this.attached = true;
      device = deviceOf(await this.must('attach', flexArgv.attach(v, this.node, true)), '');
      device = deviceOf(await this.must('waitforattach', flexArgv.waitforattach(v, device, true)), device);
      mkdirSync(this.staging, { recursive: true, mode: 0o750 });
      if (!mounted(this.staging)) {
        const md = await this.must('mountdevice', flexArgv.mountdevice(v, this.staging, device, true));
        if (md.kind === 'not-supported') {
          if (!device) throw new Error('mountdevice is Not supported and attach gave no device to mount');
          await this.host(`mount ${device} (kubelet's default)`, 'mount', [...(v.fsType ? ['-t', v.fsType] : []), '-o', 'ro', '--', device, this.staging]);
        }
      }
    }
    mkdirSync(this.target, { recursive: true, mode: 0o750 });
    const pod = { name: 'twinvol-verify', namespace: 'default', uid: POD_UID, serviceAccount: 'default' };
    const m = await this.must('mount', flexArgv.mount(v, this.target, { readonly: true, stagingPath: this.staging, pod }));
    if (m.kind === 'not-supported') {
      if (!attachable || !mounted(this.staging)) throw new Error('mount is Not supported and nothing is mounted at the device mount path to bind from');
      await this.host('bind from the device mount path', 'mount', ['--bind', '--', this.staging, this.target]);
      await this.host('remount read-only', 'mount', ['-o', 'remount,bind,ro', '--', this.target]);
    }
    return { path: this.target, device };
  }

  /** Teardown as kubelet does it; every step is tried even when one fails, the first failure is thrown. */
  async down(): Promise<void> {
    const errors: string[] = [];
    const step = (what: () => Promise<void>) => attempt(errors, what);
    await step(async () => {
      if (mounted(this.target)) {
        const r = await this.must('unmount', flexArgv.unmount(this.target));
        if (r.kind === 'not-supported') await this.host("umount (kubelet's default)", 'umount', ['--', this.target]);
      }
      // "Flexvolume driver may remove the directory. Ignore if it does."
      rmdirQuiet(this.target);
    });
    if (this.attached) {
      await step(async () => {
        if (mounted(this.staging)) {
          const r = await this.must('unmountdevice', flexArgv.unmountdevice(this.staging));
          if (r.kind === 'not-supported') await this.host("umount (kubelet's default)", 'umount', ['--', this.staging]);
        }
        rmdirQuiet(this.staging);
      });
      await step(async () => {
        const r = await this.call('detach', flexArgv.detach(this.subject.volume, this.node));
        if (r.kind === 'failure') throw new Error(`detach: ${r.message}`);
        this.attached = false;
      });
    }
    if (errors.length) throw new Error(errors.join('; '));
  }

  /** A call whose failure stops the half (Not supported is an answer: kubelet's default follows). */
  private async must(verb: string, args: string[]): Promise<ReplyOutcome> {
    const r = await this.call(verb, args);
    if (r.kind === 'failure') throw new Error(r.message);
    return r;
  }

  private async call(verb: string, args: string[]): Promise<ReplyOutcome> {
    const { outcome, run: done } = await kubeletCall(this.subject.file, verb, args, { timeoutMs: this.timeoutMs });
    this.rec.step({ model: 'flex', call: verb, outcome: label(outcome), ms: done.durationMs, detail: outcome.kind === 'success' && outcome.status.device ? `device ${outcome.status.device}` : outcome.kind === 'failure' ? outcome.message : '' });
    return outcome;
  }

  private async host(shown: string, command: string, args: string[]): Promise<void> {
    const started = performance.now();
    await run(command, args, { timeoutMs: this.timeoutMs });
    this.rec.step({ model: 'host', call: shown, outcome: 'ok', ms: performance.now() - started });
  }
}

function label(o: ReplyOutcome): string {
  return o.kind === 'success' ? 'Success' : o.kind === 'not-supported' ? 'Not supported' : 'Failure';
}

function describe(o: ReplyOutcome): string {
  return o.kind === 'failure' ? o.message : label(o);
}

function deviceOf(o: ReplyOutcome, fallback: string): string {
  return o.kind === 'success' && o.status.device ? o.status.device : fallback;
}

export function mounted(path: string): boolean {
  return mountAt(path) !== undefined;
}

function rmdirQuiet(path: string): void {
  try {
    rmdirSync(path);
  } catch {
    // gone already, or not empty (data: kept)
  }
}
