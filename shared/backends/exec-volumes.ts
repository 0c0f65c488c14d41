import { mkdir, realpath, rmdir } from 'node:fs/promises';
import { errnoCode, failedPrecondition } from '../errors.js';
import { mountAt, readMounts } from '../mountinfo.js';
import { run } from '../runner.js';
import type { ExecVolume } from './exec.js';
import { type CallResult, FlexDrivers, type FlexLog, type FlexSettings } from './exec-driver.js';
import type { DriverCapabilities } from './exec-reply.js';

/**
 * CSI calls made into FlexVolume calls, with kubelet's exact argv and option keys
 * (kubernetes pkg/volume/flexvolume: driver-call.go for the keys, attacher.go, detacher.go, mounter.go,
 * unmounter.go, expander.go for each verb's arguments and its "Not supported" fallback).
 *
 * Where kubelet looks at the mount table before a call, so does this, and more strictly: kubelet checks
 * before `mount` and `mountdevice` but calls `unmount` whenever the path exists, and a CSI CO retries
 * any call whose reply it missed. A driver that stacks a second mount on a repeated `mount`, or fails a
 * repeated `unmount`, is therefore never called twice for the same path: a mounted target is not
 * mounted again, an unmounted one not unmounted again.
 */

// driver-call.go option keys.
const KEY = {
  fsType: 'kubernetes.io/fsType',
  readwrite: 'kubernetes.io/readwrite',
  secret: 'kubernetes.io/secret',
  fsGroup: 'kubernetes.io/mounterArgs.FsGroup',
  pvOrVolumeName: 'kubernetes.io/pvOrVolumeName',
  podName: 'kubernetes.io/pod.name',
  podNamespace: 'kubernetes.io/pod.namespace',
  podUid: 'kubernetes.io/pod.uid',
  serviceAccount: 'kubernetes.io/serviceAccount.name',
} as const;

/** The pod a publish is for (CSI pod info on mount: csi.storage.k8s.io/pod.* in the volume context). */
export interface PodInfo {
  name: string;
  namespace: string;
  uid: string;
  serviceAccount: string;
}

export interface ExecPublish {
  readonly: boolean;
  /** Where NodeStage put the volume (attachable drivers): the source of the bind kubelet falls back to. */
  stagingPath?: string;
  fsGroup?: number;
  pod?: PodInfo;
  /** CSI node_publish_secrets: the driver gets each as kubernetes.io/secret/<key>, base64 as kubelet sends them. */
  secrets?: Readonly<Record<string, string>>;
}

/** What a node-side call did, for its log line (never the options: they may hold secrets). */
export interface Done {
  /** The path was already as asked; the driver was not called. */
  skipped?: string;
  /** kubelet's fallback ran because the driver answered Not supported. */
  fallback?: string;
}

/** NewOptionsForDriver: kubelet's keys, then the extra ones, then the PV's options over all of them. */
function optionsJson(volume: ExecVolume, readonly: boolean, extra: Record<string, string> = {}): string {
  return JSON.stringify({
    [KEY.fsType]: volume.fsType,
    [KEY.readwrite]: readonly ? 'ro' : 'rw',
    [KEY.pvOrVolumeName]: volume.id,
    ...extra,
    ...volume.options,
  });
}

/**
 * Each verb's argv after the verb, as kubelet builds it. ExecVolumes below and `twinvol flex check`
 * (flex/check.ts) both call drivers through these, so the checker tries exactly what the server sends.
 */
export const flexArgv = {
  attach: (volume: ExecVolume, node: string, readonly: boolean): string[] => [optionsJson(volume, readonly), node],
  detach: (volume: ExecVolume, node: string): string[] => [volume.id, node],
  isattached: (volume: ExecVolume, node: string): string[] => [optionsJson(volume, false), node],
  waitforattach: (volume: ExecVolume, device: string, readonly: boolean): string[] => [device, optionsJson(volume, readonly)],
  mountdevice: (volume: ExecVolume, path: string, device: string, readonly: boolean): string[] => [path, device, optionsJson(volume, readonly)],
  unmountdevice: (path: string): string[] => [path],
  /** With the pod, secrets (base64, as kubelet sends them) and fsGroup kubelet adds; `secrets` gets every value to scrub. */
  mount(volume: ExecVolume, target: string, opts: ExecPublish, secrets: string[] = []): string[] {
    const extra: Record<string, string> = {};
    if (opts.pod) {
      extra[KEY.podName] = opts.pod.name;
      extra[KEY.podNamespace] = opts.pod.namespace;
      extra[KEY.podUid] = opts.pod.uid;
      extra[KEY.serviceAccount] = opts.pod.serviceAccount;
    }
    for (const [name, value] of Object.entries(opts.secrets ?? {})) {
      const encoded = Buffer.from(value, 'utf8').toString('base64');
      extra[`${KEY.secret}/${name}`] = encoded;
      secrets.push(value, encoded);
    }
    if (opts.fsGroup !== undefined) extra[KEY.fsGroup] = String(opts.fsGroup);
    return [target, optionsJson(volume, opts.readonly, extra)];
  },
  unmount: (target: string): string[] => [target],
  expandvolume: (volume: ExecVolume, newSize: number, oldSize: number): string[] => [optionsJson(volume, false), '', String(newSize), String(oldSize)],
  expandfs: (volume: ExecVolume, device: string, stagingPath: string, newSize: number, oldSize: number): string[] => [optionsJson(volume, false), device, stagingPath, String(newSize), String(oldSize)],
};

export class ExecVolumes {
  readonly drivers: FlexDrivers;

  constructor(
    settings: FlexSettings,
    private readonly timeoutMs: number,
    log?: FlexLog,
  ) {
    this.drivers = new FlexDrivers(settings, log);
  }

  capabilities(volume: ExecVolume): Promise<DriverCapabilities> {
    return this.drivers.capabilities(volume.driver);
  }

  /** ControllerPublishVolume: `attach <json> <node>`; the device goes to the node in publish_context. */
  async attach(volume: ExecVolume, node: string, readonly: boolean): Promise<string> {
    if (!(await this.capabilities(volume)).attach) return '';
    const r = await this.drivers.call(volume.driver, 'attach', flexArgv.attach(volume, node, readonly));
    // attacherDefaults.Attach: nothing to do, no device.
    return r.supported ? r.status.device : '';
  }

  /** ControllerUnpublishVolume: `detach <pv-name> <node>` (Not supported: nothing to do, as kubelet). */
  async detach(volume: ExecVolume, node: string): Promise<void> {
    if (!(await this.capabilities(volume)).attach) return;
    await this.drivers.call(volume.driver, 'detach', flexArgv.detach(volume, node));
  }

  /** `isattached <json> <node>`; undefined when the driver does not say (kubelet then assumes attached). */
  async isAttached(volume: ExecVolume, node: string): Promise<boolean | undefined> {
    if (!(await this.capabilities(volume)).attach) return undefined;
    const r = await this.drivers.call(volume.driver, 'isattached', flexArgv.isattached(volume, node));
    return r.supported ? r.status.attached : undefined;
  }

  /**
   * NodeStageVolume: `waitforattach <device> <json>`, then `mountdevice <path> <device> <json>`
   * (attacher.go WaitForAttach, MountDevice). A driver without attach has nothing to stage.
   */
  async stage(volume: ExecVolume, path: string, device: string, readonly: boolean): Promise<Done> {
    if (!(await this.capabilities(volume)).attach) return { skipped: 'the driver does not attach: nothing to stage' };
    if (await isMountPoint(path)) return { skipped: 'already mounted' };
    await mkdir(path, { recursive: true, mode: 0o750 });
    const waited = await this.drivers.call(volume.driver, 'waitforattach', flexArgv.waitforattach(volume, device, readonly));
    const found = waited.supported ? waited.status.device : device;
    const mounted = await this.drivers.call(volume.driver, 'mountdevice', flexArgv.mountdevice(volume, path, found, readonly));
    if (mounted.supported) return {};
    // attacherDefaults.MountDevice: kubelet mounts the device itself; with no device there is nothing.
    if (found === '') return { fallback: 'mountdevice Not supported and no device: nothing mounted' };
    await run('mount', [...(volume.fsType ? ['-t', volume.fsType] : []), ...(readonly ? ['-o', 'ro'] : []), '--', found, path], { timeoutMs: this.timeoutMs });
    return { fallback: `mountdevice Not supported: mounted ${found} here` };
  }

  /** NodeUnstageVolume: `unmountdevice <path>` while something is mounted there (detacher.go UnmountDevice). */
  async unstage(volume: ExecVolume, path: string): Promise<Done> {
    if (!(await isMountPoint(path))) return { skipped: 'not mounted' };
    const r = await this.drivers.call(volume.driver, 'unmountdevice', flexArgv.unmountdevice(path));
    if (r.supported) return {};
    await run('umount', ['--', path], { timeoutMs: this.timeoutMs });
    return { fallback: 'unmountdevice Not supported: unmounted here' };
  }

  /**
   * NodePublishVolume: `mount <target> <json>` with the pod, secrets and fsGroup kubelet adds
   * (mounter.go SetUpAt). Not supported: a bind mount from the staging path (mounterDefaults).
   */
  async publish(volume: ExecVolume, target: string, opts: ExecPublish): Promise<Done> {
    if (await isMountPoint(target)) return { skipped: 'already mounted' };
    await mkdir(target, { recursive: true, mode: 0o750 });
    const secretValues: string[] = [];
    const r: CallResult = await this.drivers.call(volume.driver, 'mount', flexArgv.mount(volume, target, opts, secretValues), secretValues);
    if (r.supported) return {};
    if (opts.stagingPath === undefined || !(await isMountPoint(opts.stagingPath)))
      throw failedPrecondition(`FlexVolume driver ${volume.driver.full} answers mount Not supported and nothing is staged to bind from`);
    await run('mount', ['--bind', '--', opts.stagingPath, target], { timeoutMs: this.timeoutMs });
    if (opts.readonly) await run('mount', ['-o', 'remount,bind,ro', '--', target], { timeoutMs: this.timeoutMs });
    return { fallback: 'mount Not supported: bind-mounted from staging' };
  }

  /** NodeUnpublishVolume: `unmount <target>` while mounted (unmounter.go TearDownAt), then the empty directory goes. */
  async unpublish(volume: ExecVolume, target: string): Promise<Done> {
    let done: Done = { skipped: 'not mounted' };
    if (await isMountPoint(target)) {
      const r = await this.drivers.call(volume.driver, 'unmount', flexArgv.unmount(target));
      done = {};
      if (!r.supported) {
        await run('umount', ['--', target], { timeoutMs: this.timeoutMs });
        done = { fallback: 'unmount Not supported: unmounted here' };
      }
    }
    // "Flexvolume driver may remove the directory. Ignore if it does." A non-empty one is data: kept.
    await rmdir(target).catch((err: unknown) => {
      if (errnoCode(err) !== 'ENOENT' && errnoCode(err) !== 'ENOTEMPTY') throw err;
    });
    return done;
  }

  /** ControllerExpandVolume: `expandvolume <json> <device-mount-path> <new> <old>` (expander.go). */
  async expandVolume(volume: ExecVolume, newSize: number, oldSize: number): Promise<void> {
    // The controller knows no node's mount path; kubelet's would be its own global one, unknown here.
    await this.drivers.call(volume.driver, 'expandvolume', flexArgv.expandvolume(volume, newSize, oldSize));
  }

  /** NodeExpandVolume: `expandfs <json> <device> <device-mount-path> <new> <old>` (expander.go NodeExpand). */
  async expandFs(volume: ExecVolume, stagingPath: string, newSize: number, oldSize: number): Promise<void> {
    // kubelet passes the device it attached; here the mount table says what is mounted at the staging path.
    const real = await realpath(stagingPath);
    const source = mountAt(real)?.source ?? '';
    const device = source.startsWith('/dev/') ? source : '';
    await this.drivers.call(volume.driver, 'expandfs', flexArgv.expandfs(volume, device, stagingPath, newSize, oldSize));
  }
}

/** Something is mounted exactly at `path` (its real path), by the kernel's account. */
export async function isMountPoint(path: string): Promise<boolean> {
  let real: string;
  try {
    real = await realpath(path);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
  return readMounts().some((m) => m.mountPoint === real);
}
