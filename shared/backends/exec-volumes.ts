import type { BackendPublish, PodInfo } from './backend.js';
import { KUBELET_SECRET_PREFIX } from '../log.js';
import { type ExecVolume, type FlexPort, stagedMount } from './exec.js';
import { type CallResult, FlexDrivers, type FlexLog, type FlexSettings } from './exec-driver.js';
import type { DriverCapabilities } from './exec-reply.js';

/**
 * CSI calls made into FlexVolume calls, with kubelet's exact argv and option keys
 * (kubernetes pkg/volume/flexvolume: driver-call.go for the keys, attacher.go, detacher.go, mounter.go,
 * unmounter.go, expander.go for each verb's arguments and its "Not supported" fallback).
 *
 * Where kubelet looks at the mount table before a call, the core does, and more strictly (shared/core/
 * staging.ts, publishing.ts): kubelet checks before `mount` and `mountdevice` but calls `unmount`
 * whenever the path exists, and a CSI CO retries any call whose reply it missed. A driver that stacks a
 * second mount on a repeated `mount`, or fails a repeated `unmount`, is therefore never called twice for
 * the same path: a mounted target is not mounted again, an unmounted one not unmounted again.
 */

// driver-call.go option keys.
const KEY = {
  fsType: 'kubernetes.io/fsType',
  readwrite: 'kubernetes.io/readwrite',
  fsGroup: 'kubernetes.io/mounterArgs.FsGroup',
  pvOrVolumeName: 'kubernetes.io/pvOrVolumeName',
  podName: 'kubernetes.io/pod.name',
  podNamespace: 'kubernetes.io/pod.namespace',
  podUid: 'kubernetes.io/pod.uid',
  serviceAccount: 'kubernetes.io/serviceAccount.name',
} as const;

/** A publish's request, as the core hands it to the backend (shared/backends/backend.ts). */
export type ExecPublish = BackendPublish;
export type { PodInfo };

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
  /**
   * With the pod, secrets (base64, as kubelet sends them) and fsGroup kubelet adds; FlexDrivers.call
   * finds the secrets to cut from the driver's words in this options argument (shared/log.ts secretsInArgument).
   */
  mount(volume: ExecVolume, target: string, opts: ExecPublish): string[] {
    const extra: Record<string, string> = {};
    if (opts.pod) {
      extra[KEY.podName] = opts.pod.name;
      extra[KEY.podNamespace] = opts.pod.namespace;
      extra[KEY.podUid] = opts.pod.uid;
      extra[KEY.serviceAccount] = opts.pod.serviceAccount;
    }
    for (const [name, value] of Object.entries(opts.secrets ?? {})) extra[`${KUBELET_SECRET_PREFIX}${name}`] = Buffer.from(value, 'utf8').toString('base64');
    if (opts.fsGroup !== undefined) extra[KEY.fsGroup] = String(opts.fsGroup);
    return [target, optionsJson(volume, opts.readonly, extra)];
  },
  unmount: (target: string): string[] => [target],
  /** `deviceMountPath`: kubelet's global mount path of the volume (flexDeviceMountPath, shared/backends/exec.ts). */
  expandvolume: (volume: ExecVolume, newSize: number, oldSize: number, deviceMountPath = ''): string[] => [optionsJson(volume, false), deviceMountPath, String(newSize), String(oldSize)],
  expandfs: (volume: ExecVolume, device: string, stagingPath: string, newSize: number, oldSize: number): string[] => [optionsJson(volume, false), device, stagingPath, String(newSize), String(oldSize)],
};

/**
 * The driver-calling object the CSI server hands the core as its `flex` port (shared/backends/exec.ts
 * FlexPort): each method the FlexVolume calls of one step. The core has already taken the lock,
 * applied its rules and written its records, and it looks at the mount table before calling a mount
 * or an unmount step, so a driver is never asked to mount a mounted path or unmount an unmounted one.
 */
export class ExecVolumes implements FlexPort {
  readonly drivers: FlexDrivers;

  constructor(
    settings: FlexSettings,
    private readonly log: FlexLog = () => {},
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

  /**
   * `isattached <json> <node>`; undefined when the driver does not say (kubelet then assumes attached).
   * A driver that fails to say (or cannot be run) says nothing either: the attach-detach controller's
   * VolumesAreAttached leaves every volume attached on an error. Thrown, it failed the whole
   * ControllerGetVolume or ListVolumes, every other volume's entry with it.
   */
  async isAttached(volume: ExecVolume, node: string): Promise<boolean | undefined> {
    try {
      if (!(await this.capabilities(volume)).attach) return undefined;
      const r = await this.drivers.call(volume.driver, 'isattached', flexArgv.isattached(volume, node));
      return r.supported ? r.status.attached : undefined;
    } catch (err) {
      this.log('warn', 'FlexVolume isattached gave no answer: the attachment stands', { driver: volume.driver.full, volumeId: volume.id, node, error: err instanceof Error ? err.message : String(err) });
      return undefined;
    }
  }

  /**
   * NodeStageVolume: `waitforattach <device> <json>`, then `mountdevice <path> <device> <json>`
   * (attacher.go WaitForAttach, MountDevice). A driver without attach has nothing to stage. Answers
   * the device the driver left to kubelet (mountdevice "Not supported"), which the backend formats
   * if blank and mounts (shared/backends/exec.ts), or undefined when there is nothing more to do.
   */
  async stage(volume: ExecVolume, path: string, device: string, readonly: boolean): Promise<string | undefined> {
    if (!(await this.capabilities(volume)).attach) return undefined;
    const waited = await this.drivers.call(volume.driver, 'waitforattach', flexArgv.waitforattach(volume, device, readonly));
    const found = waited.supported ? waited.status.device : device;
    const mounted = await this.drivers.call(volume.driver, 'mountdevice', flexArgv.mountdevice(volume, path, found, readonly));
    if (mounted.supported) return undefined;
    // attacherDefaults.MountDevice: kubelet mounts the device itself; with no device there is nothing.
    if (found === '') {
      this.log('info', 'FlexVolume mountdevice Not supported and no device: nothing staged', { driver: volume.driver.full, volumeId: volume.id });
      return undefined;
    }
    return found;
  }

  /** NodeUnstageVolume: `unmountdevice <path>` (detacher.go UnmountDevice); false: Not supported. */
  async unstage(volume: ExecVolume, path: string): Promise<boolean> {
    return (await this.drivers.call(volume.driver, 'unmountdevice', flexArgv.unmountdevice(path))).supported;
  }

  /**
   * NodePublishVolume: `mount <target> <json>` with the pod, secrets and fsGroup kubelet adds
   * (mounter.go SetUpAt); false: Not supported (kubelet's mounterDefaults bind from the staging).
   */
  async publish(volume: ExecVolume, target: string, opts: ExecPublish): Promise<boolean> {
    const r: CallResult = await this.drivers.call(volume.driver, 'mount', flexArgv.mount(volume, target, opts));
    return r.supported;
  }

  /** NodeUnpublishVolume: `unmount <target>` (unmounter.go TearDownAt); false: Not supported. */
  async unpublish(volume: ExecVolume, target: string): Promise<boolean> {
    return (await this.drivers.call(volume.driver, 'unmount', flexArgv.unmount(target))).supported;
  }

  /** ControllerExpandVolume: `expandvolume <json> <device-mount-path> <new> <old>` (expander.go). */
  async expandVolume(volume: ExecVolume, deviceMountPath: string, newSize: number, oldSize: number): Promise<void> {
    await this.drivers.call(volume.driver, 'expandvolume', flexArgv.expandvolume(volume, newSize, oldSize, deviceMountPath));
  }

  /**
   * NodeExpandVolume: `expandfs <json> <device> <device-mount-path> <new> <old>` (expander.go NodeExpand);
   * false: Not supported (kubelet's expanderDefaults grow the filesystem themselves: shared/backends/exec.ts).
   */
  async expandFs(volume: ExecVolume, deviceMountPath: string, newSize: number, oldSize: number): Promise<boolean> {
    // kubelet passes the device it attached; here the mount table says what is mounted at the staging path.
    const device = (await stagedMount(deviceMountPath))?.device ?? '';
    return (await this.drivers.call(volume.driver, 'expandfs', flexArgv.expandfs(volume, device, deviceMountPath, newSize, oldSize))).supported;
  }
}
