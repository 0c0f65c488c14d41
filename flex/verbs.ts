import { attach, attachmentOf, attachUnderPvName, checkedPathUnder, type Core, detach, expandOnNode, expandVolume, invalidArgument, isValidPvName, nodeAttach, parseSize, publish, registerNode, rememberPvName, stage, unpublish, unstage, validateNodeName, validatePvName, type VolumeId, type VolumeRecord } from '../shared/index.js';
import { claimsOf, type FlexOptions, parseOptions, resolveVolume, volumeIdOf, volumeIdOfPv } from './options.js';
import { type FlexReply, success } from './reply.js';
import type { FlexVerb } from './verb-names.js';

/** What a verb handler is given: the argv after the verb, the core, and a place to name the volume for the log. */
export interface VerbContext {
  core: Core;
  args: readonly string[];
  note: (fields: { volumeId?: string }) => void;
}

type Handler = (ctx: VerbContext) => Promise<FlexReply>;

interface VerbSpec {
  /** Exact argv count after the verb: kubelet never sends more or fewer. */
  arity: number;
  usage: string;
  handler: Handler;
}

/** Options argument parsed and the volume resolved, with its id noted for the log line. */
async function volumeFrom(ctx: VerbContext, json: string | undefined): Promise<{ opts: FlexOptions; volume: VolumeRecord }> {
  const opts = parseOptions(json);
  ctx.note({ volumeId: opts.volumeId ?? opts.pvName });
  const volume = await resolveVolume(ctx.core, opts);
  ctx.note({ volumeId: volume.id });
  return { opts, volume };
}


const arg = (ctx: VerbContext, i: number): string => ctx.args[i] ?? '';

/**
 * Calls that set a volume up remember which volume their PV names: detach, and every call kubelet
 * makes for a volume it reconstructed after a restart, carry only the PV name. Written once; later
 * calls only read it. A name that still stands for another attached volume (an inline volume's name,
 * which pods share) is kept: attach refuses it (shared/core/pv-names.ts).
 */
async function rememberPv(core: Core, opts: FlexOptions, volume: VolumeRecord): Promise<void> {
  if (opts.pvName && opts.volumeId) await rememberPvName(core, opts.pvName, volume.id);
}

export const VERBS: Record<FlexVerb, VerbSpec> = {
  getvolumename: {
    arity: 1,
    usage: 'getvolumename <json>',
    handler: async (ctx) => {
      const { volume } = await volumeFrom(ctx, ctx.args[0]);
      return success({ volumeName: volume.id });
    },
  },

  attach: {
    arity: 2,
    usage: 'attach <json> <node>',
    handler: async (ctx) => {
      const node = validateNodeName(arg(ctx, 1));
      const { opts, volume } = await volumeFrom(ctx, ctx.args[0]);
      // The controller-manager names a node it knows: known to the catalog too from now on, so that
      // CSI may publish there later (shared/core/nodes.ts).
      const step = async () => {
        await registerNode(ctx.core, node, undefined, 'flex');
        await attach(ctx.core, volume.id, node, { readonly: false, via: 'flex', claims: claimsOf(opts) });
      };
      // detach names only the PV: which volume it stands for is written before attaching.
      await (opts.pvName && opts.volumeId ? attachUnderPvName(ctx.core, opts.pvName, volume.id, step) : step());
      return success({ device: '' });
    },
  },

  isattached: {
    arity: 2,
    usage: 'isattached <json> <node>',
    handler: async (ctx) => {
      const node = validateNodeName(arg(ctx, 1));
      const opts = parseOptions(ctx.args[0]);
      const id = await volumeIdOf(ctx.core, opts);
      ctx.note({ volumeId: id });
      const volume = id ? await ctx.core.catalog.getVolume(id) : undefined;
      return success({ attached: Boolean(volume && attachmentOf(volume, node)) });
    },
  },

  detach: {
    arity: 2,
    usage: 'detach <pvName> <node>',
    handler: async (ctx) => {
      const pvName = validatePvName(arg(ctx, 0));
      const node = validateNodeName(arg(ctx, 1));
      const id = await volumeIdOfPv(ctx.core, pvName);
      ctx.note({ volumeId: id });
      await detach(ctx.core, id, node);
      return success();
    },
  },

  waitforattach: {
    arity: 2,
    usage: 'waitforattach <device> <json>',
    handler: async (ctx) => {
      const { opts, volume } = await volumeFrom(ctx, ctx.args[1]);
      const { device } = await nodeAttach(ctx.core, volume.id, { claims: claimsOf(opts) });
      return success({ device });
    },
  },

  mountdevice: {
    arity: 3,
    usage: 'mountdevice <deviceMountPath> <device> <json>',
    handler: async (ctx) => {
      await checkedPathUnder(arg(ctx, 0), ctx.core.config.kubeletDir, 'staging path');
      const { opts, volume } = await volumeFrom(ctx, ctx.args[2]);
      // kubelet calls unmountdevice only when the device mount path is a mount point, and goes on to
      // detach when it is not (pkg/volume/flexvolume/detacher.go UnmountDevice): a staging that were
      // its record alone would never be unstaged.
      await stage(ctx.core, volume.id, arg(ctx, 0), { readonly: opts.readonly, claims: claimsOf(opts), mountPoint: true });
      await rememberPv(ctx.core, opts, volume);
      return success();
    },
  },

  unmountdevice: {
    arity: 1,
    usage: 'unmountdevice <deviceMountPath>',
    handler: async (ctx) => {
      // kubelet's device mount path ends in the PV's name (.../mounts/<pv>): the volume attach recorded
      // for it lets the core clear this node's mark even when a reboot took the node's records.
      const volumeId = await volumeIdOfKubeletPath(ctx.core, arg(ctx, 0));
      // Something twinvol did not make is left where it is, and the reply's message names it.
      const left = await unstage(ctx.core, arg(ctx, 0), volumeId ? { volumeId } : {});
      return success(left ? { message: left } : {});
    },
  },

  mount: {
    arity: 2,
    usage: 'mount <podVolumeDir> <json>',
    handler: async (ctx) => {
      // Every input is checked before createIfMissing may create anything.
      await checkedPathUnder(arg(ctx, 0), ctx.core.config.kubeletDir, 'target path');
      const { opts, volume } = await volumeFrom(ctx, ctx.args[1]);
      await publish(ctx.core, volume.id, arg(ctx, 0), { readonly: opts.readonly, fsGroup: opts.fsGroup, via: 'flex', claims: claimsOf(opts) });
      await rememberPv(ctx.core, opts, volume);
      return success();
    },
  },

  unmount: {
    arity: 1,
    usage: 'unmount <podVolumeDir>',
    handler: async (ctx) => {
      // A pod dir ends in the PV's name too (or, for an inline volume, the pod's own name for it): a
      // guess, for releasing the attachment a mount without attach made when a reboot took its records.
      const guessedVolumeId = await volumeIdOfKubeletPath(ctx.core, arg(ctx, 0));
      const left = await unpublish(ctx.core, arg(ctx, 0), guessedVolumeId ? { guessedVolumeId } : {});
      return success(left ? { message: left } : {});
    },
  },

  expandvolume: {
    arity: 4,
    usage: 'expandvolume <json> <deviceMountPath> <newSize> <oldSize>',
    handler: async (ctx) => {
      const newSize = parseByteCount(arg(ctx, 2), 'newSize');
      parseByteCount(arg(ctx, 3), 'oldSize');
      const { volume } = await volumeFrom(ctx, ctx.args[0]);
      const result = await expandVolume(ctx.core, volume.id, newSize);
      return success({ volumeNewSize: result.capacityBytes });
    },
  },

  expandfs: {
    arity: 5,
    usage: 'expandfs <json> <devicePath> <mountPath> <newSize> <oldSize>',
    handler: async (ctx) => {
      const newSize = parseByteCount(arg(ctx, 3), 'newSize');
      parseByteCount(arg(ctx, 4), 'oldSize');
      const { volume } = await volumeFrom(ctx, ctx.args[0]);
      const grown = await expandOnNode(ctx.core, volume.id, undefined, newSize);
      return success({ volumeNewSize: grown.capacityBytes });
    },
  },
};

/** The volume whose PV names the last part of a kubelet path (device mount path, pod dir), when a call recorded one. */
async function volumeIdOfKubeletPath(core: Core, path: string): Promise<VolumeId | undefined> {
  const pv = path.split('/').pop() ?? '';
  return isValidPvName(pv) ? core.catalog.pvVolume(pv) : undefined;
}

/** Sizes in expand calls are plain base-10 byte counts. */
function parseByteCount(value: string, what: string): number {
  if (!/^[0-9]+$/.test(value)) throw invalidArgument(`${what} must be a number of bytes`);
  return parseSize(value, what);
}
