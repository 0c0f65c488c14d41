// FlexVolume rows: each verb kubelet calls often, and the whole attachable lifecycle of a block
// volume, against bare `node -e 0` started the same way in the same rounds. `flexRows` takes the
// executable, so another module can measure another build of it (the single executable) alike.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { FLEX_BIN, flexOk, interleaved, makeScratch, median, progress, row, timeSpawn } from './lib.mjs';

const ATTACHABLE = ['attach', 'waitforattach', 'mountdevice', 'mount', 'unmount', 'unmountdevice', 'detach'];

function flexOptions(pv, extra = {}) {
  return JSON.stringify({ 'kubernetes.io/fsType': '', 'kubernetes.io/pvOrVolumeName': pv, 'kubernetes.io/readwrite': 'rw', ...extra });
}
function mountOptions(pv, uid, extra = {}) {
  return flexOptions(pv, { 'kubernetes.io/pod.name': `pod-${uid}`, 'kubernetes.io/pod.namespace': 'default', 'kubernetes.io/pod.uid': uid, 'kubernetes.io/serviceAccount.name': 'default', ...extra });
}

/**
 * Rows for one FlexVolume executable `bin`, labelled `tag` ("bundle", "single executable"): row ids
 * are `flex.<tag>.<verb>`. Every figure is a median over `rounds` interleaved rounds. With
 * `installedWithNode`, `init` also of a copy installed by `twinvol install flex --node`, whose first
 * line names node rather than env (flex/node-shebang.ts): what the flag saves a call.
 */
export async function flexRows(bin, tag, { rounds, installedWithNode = false }) {
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run npm run build`);
  const s = makeScratch('flex');
  try {
    const env = s.env;
    const flex = (...args) => timeSpawn(bin, args, env, flexOk(args));
    const cli = (...args) => timeSpawn(bin, args, env);
    cli('volume', 'create', 'vol-dir', '--backend', 'dir', '--size', '1Mi');
    cli('volume', 'create', 'vol-blk', '--size', '64Mi');
    const dirOpts = mountOptions('pv-dir', 'uid-d', { volumeId: 'vol-dir' });
    const dirTarget = join(s.kubeletDir, 'pods/uid-d/volumes/acme~twinvol/pv-dir');
    const blkOpts = flexOptions('pv-blk', { volumeId: 'vol-blk' });
    const global = join(s.kubeletDir, 'plugins/kubernetes.io/flexvolume/acme/twinvol/mounts/pv-blk');
    const blkTarget = join(s.kubeletDir, 'pods/uid-b/volumes/acme~twinvol/pv-blk');
    const pinned = join(s.pluginDir, 'acme~twinvol/twinvol');
    if (installedWithNode) cli('install', 'flex', '--plugin-dir', s.pluginDir, '--vendor', 'acme', '--node', process.execPath);
    const contenders = [
      () => timeSpawn(process.execPath, ['-e', '0'], env),
      () => flex('init'),
      () => flex('getvolumename', blkOpts),
      () => flex('isattached', blkOpts, 'bench'),
      () => [flex('mount', dirTarget, dirOpts), flex('unmount', dirTarget)],
      () => {
        let device = '';
        const steps = {
          attach: () => flex('attach', blkOpts, 'bench'),
          waitforattach: () => timeSpawn(bin, ['waitforattach', '', blkOpts], env, (out) => (device = JSON.parse(out).device)),
          mountdevice: () => flex('mountdevice', global, device, blkOpts),
          mount: () => flex('mount', blkTarget, mountOptions('pv-blk', 'uid-b', { volumeId: 'vol-blk' })),
          unmount: () => flex('unmount', blkTarget),
          unmountdevice: () => flex('unmountdevice', global),
          detach: () => flex('detach', 'pv-blk', 'bench'),
        };
        return ATTACHABLE.reduce((sum, verb) => sum + steps[verb](), 0);
      },
      ...(installedWithNode ? [() => timeSpawn(pinned, ['init'], env, flexOk(['init']))] : []),
    ];
    progress(`FlexVolume (${tag}): ${rounds} interleaved rounds`);
    const [node, init, getvolumename, isattached, dirPair, blockLife, pinnedInit] = await interleaved(contenders, rounds);
    const base = median(node);
    const ref = 'node -e 0';
    return [
      row(`flex.${tag}.init`, `FlexVolume ${tag}: init`, median(init), 'ms', base, ref),
      row(`flex.${tag}.getvolumename`, `FlexVolume ${tag}: getvolumename`, median(getvolumename), 'ms', base, ref),
      row(`flex.${tag}.isattached`, `FlexVolume ${tag}: isattached`, median(isattached), 'ms', base, ref),
      row(`flex.${tag}.dir-mount`, `FlexVolume ${tag}: mount (dir volume)`, median(dirPair.map((p) => p[0])), 'ms', base, ref),
      row(`flex.${tag}.dir-unmount`, `FlexVolume ${tag}: unmount (dir volume)`, median(dirPair.map((p) => p[1])), 'ms', base, ref),
      row(`flex.${tag}.block-lifecycle`, `FlexVolume ${tag}: attachable lifecycle, block (7 calls)`, median(blockLife), 'ms', 7 * base, `7 x ${ref}`),
      ...(pinnedInit ? [row(`flex.${tag}.init-node`, `FlexVolume ${tag}, installed with --node: init`, median(pinnedInit), 'ms', base, ref)] : []),
    ];
  } finally {
    s.cleanup();
  }
}

export const suite = {
  title: 'FlexVolume (bundle)',
  order: 10,
  run: (opts) => flexRows(FLEX_BIN, 'bundle', { rounds: opts.short ? 2 : 30, installedWithNode: true }),
};
