import { callFlex, loggedWork, runFlex } from '../../flex/compare/kubelet-flex.js';
import { goJson } from '../../test/helpers/go-json.js';
import { flexGlobalMountPath, flexPodVolumePath } from '../../shared/index.js';
import type { ScratchWorld as Scratch } from '../../flex/scratch-world.js';
import { printStep } from './report.js';

export interface FlexCall {
  reply: Record<string, unknown>;
  exitCode: number;
}

/** The FlexVolume driver directory the demo's calls stand for: `acme~twinvol`. */
const ACME = { vendor: 'acme', name: 'twinvol' };

/** Runs the bundled executable exactly as kubelet does (as `twinvol compare` runs it) and prints the call with what it spawned. */
export class FlexDriver {
  constructor(
    private readonly bin: string,
    private readonly scratch: Scratch,
    /** Aborted by SIGINT or SIGTERM: no further call is made, the one under way is let finish. */
    private readonly signal?: AbortSignal,
  ) {}

  /** One call (flex/compare/kubelet-flex.ts runs it); `expect` "Failure" is for the refusals the demo means to show. */
  async call(argv: string[], shown = argv[0] ?? '', expect: 'Success' | 'Failure' = 'Success'): Promise<FlexCall> {
    this.signal?.throwIfAborted();
    const [verb = '', ...args] = argv;
    const r = await callFlex(this.bin, { PATH: '/usr/bin:/bin', ...this.scratch.env }, verb, args);
    const reply = JSON.parse(r.output) as Record<string, unknown>;
    const extra = Object.entries(reply)
      .filter(([k]) => k !== 'status')
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(' ');
    printStep({ model: 'flex', call: shown, outcome: String(reply.status), ms: r.ms, detail: [extra, this.lastWork(verb)].filter(Boolean).join('  ') });
    if (r.failure !== undefined && expect !== 'Failure') throw new Error(`flex ${verb} failed: ${String(reply.message)}`);
    if (r.failure === undefined && expect === 'Failure') throw new Error(`flex ${verb} succeeded where a Failure was expected`);
    return { reply, exitCode: r.exitCode };
  }

  /** The administrator's CLI (`twinvol volume ...`): human output, exit code 0 on success. */
  async admin(args: string[]): Promise<void> {
    this.signal?.throwIfAborted();
    const r = await runFlex(this.bin, { PATH: '/usr/bin:/bin', ...this.scratch.env }, ['volume', ...args]);
    const [out, code] = [r.output.trim(), r.exitCode];
    printStep({ model: 'flex', call: `twinvol volume ${args.slice(0, 2).join(' ')}`, outcome: code === 0 ? 'ok' : 'failed', ms: r.durationMs, detail: out.split('\n')[0] });
    if (code !== 0) throw new Error(`twinvol volume ${args[0]} failed: ${out}`);
  }

  /**
   * The tools the call spawned and the mounts it made or undid as system calls, which run no process,
   * from the executable's own log line (init writes none).
   */
  private lastWork(verb: string): string {
    try {
      const { spawns, systemCalls } = loggedWork(this.scratch.stateDir, verb);
      return [spawns.length && `spawned: ${spawns.join(' ')}`, systemCalls.length && `system calls: ${systemCalls.join(' ')}`].filter(Boolean).join('  ');
    } catch {
      return '';
    }
  }

  /** What kubelet and the controller-manager do to give a pod the volume, on an attachable driver. */
  async attachAndMount(volumeId: string, pvName: string, podUid: string, node: string, fsType = 'ext4'): Promise<{ global: string; podDir: string }> {
    const opts = flexOptions(volumeId, pvName, fsType);
    await this.call(['init']);
    await this.call(['attach', opts, node]);
    const wait = await this.call(['waitforattach', '', opts]);
    const global = flexGlobalMountPath(this.scratch.kubeletDir, ACME, pvName);
    await this.call(['mountdevice', global, String(wait.reply.device ?? ''), opts]);
    const podDir = flexPodVolumePath(this.scratch.kubeletDir, podUid, ACME, pvName);
    const mountOpts = goJson({
      'kubernetes.io/fsType': fsType,
      'kubernetes.io/mounterArgs.FsGroup': '2000',
      'kubernetes.io/pod.name': `demo-${podUid}`,
      'kubernetes.io/pod.namespace': 'default',
      'kubernetes.io/pod.uid': podUid,
      'kubernetes.io/pvOrVolumeName': pvName,
      'kubernetes.io/readwrite': 'rw',
      volumeId,
    });
    await this.call(['mount', podDir, mountOpts]);
    return { global, podDir };
  }

  async unmountAndDetach(pvName: string, node: string, where: { global: string; podDir: string }): Promise<void> {
    await this.call(['unmount', where.podDir]);
    await this.call(['unmountdevice', where.global]);
    await this.call(['detach', pvName, node]);
  }
}

/** kubelet's options for a PV naming the volume (as attach, waitforattach and mountdevice get them); fsType "" for a dir volume. */
export function flexOptions(volumeId: string, pvName: string, fsType = 'ext4'): string {
  return goJson({ 'kubernetes.io/fsType': fsType, 'kubernetes.io/pvOrVolumeName': pvName, 'kubernetes.io/readwrite': 'rw', volumeId });
}
