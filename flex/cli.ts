import yargs from 'yargs';
import { asTwinvolError, type Core, createVolume, deleteVolume, formatSize, listNodes, listVolumes, loadConfig, type NodeRecord, notFound, openCore, parseSize, releaseAttachment, validateNodeName, validateVolumeId, type VolumeRecord } from '../shared/index.js';

/**
 * The administrator's side of FlexVolume, which has no provisioning: volumes are made here before
 * PVs name them. Lives in the same executable as the driver (`twinvol volume ...`) so one file is
 * installed; kubelet never sends the verb "volume".
 */
export async function runCli(argv: readonly string[]): Promise<number> {
  let core: Core | undefined;
  const open = () => (core ??= openCore(loadConfig()));
  const parser = yargs([...argv])
    .scriptName('twinvol')
    .usage('$0 volume|node <command>\n\nSettings come from /etc/twinvol/config.json (or TWINVOL_CONFIG) and TWINVOL_DATA_ROOT, TWINVOL_STATE_DIR, TWINVOL_KUBELET_DIR.')
    .command('volume', 'create, delete, list and inspect volumes in the catalog', (y) =>
      y
        .command(
          'create <id>',
          'create a volume',
          (c) =>
            c
              .positional('id', { type: 'string', demandOption: true, describe: 'volume id (letters, digits, . _ -; at most 128 bytes)' })
              .option('backend', { choices: ['block', 'dir', 'static'] as const, default: 'block' as const })
              .option('size', { type: 'string', describe: 'capacity, e.g. 1Gi (required for block and dir)' })
              .option('fs-type', { type: 'string', describe: 'block: ext4 or xfs; static: the source filesystem type' })
              .option('access', { choices: ['single-node', 'multi-node'] as const, default: 'single-node' as const })
              .option('source', { type: 'string', describe: 'static: what to mount (tmpfs, /path/to/image, host:/export)' })
              .option('mount-options', { type: 'string', describe: 'static: comma-separated mount options' })
              .option('json', { type: 'boolean', default: false }),
          async (a) => {
            const { volume, created } = await createVolume(open(), {
              id: a.id,
              backend: a.backend,
              capacityBytes: a.size === undefined ? 0 : parseSize(a.size),
              fsType: a['fs-type'],
              access: a.access,
              source: a.source,
              mountOptions: a['mount-options'],
              createdBy: 'cli',
            });
            print(a.json ? volume : `${created ? 'created' : 'exists'}: ${describe(volume)}`);
          },
        )
        .command(
          'delete <id>',
          'delete a volume and its data (refused while attached)',
          (c) => c.positional('id', { type: 'string', demandOption: true }),
          async (a) => {
            await deleteVolume(open(), validateVolumeId(a.id));
            print(`deleted: ${a.id}`);
          },
        )
        .command(
          'list',
          'list volumes',
          (c) => c.option('json', { type: 'boolean', default: false }),
          async (a) => {
            const volumes = await listVolumes(open());
            if (a.json) print(volumes);
            else if (!volumes.length) print('no volumes');
            else for (const v of volumes) print(describe(v));
          },
        )
        .command(
          'inspect <id>',
          'show a volume record and where this node has it mounted',
          (c) => c.positional('id', { type: 'string', demandOption: true }),
          async (a) => {
            const c = open();
            const volume = await c.catalog.getVolume(a.id);
            if (!volume) throw notFound(`volume ${a.id} does not exist`);
            print({ volume, mountsOnThisNode: await c.nodeState.listForVolume(a.id) });
          },
        )
        .command(
          'release <id> <node>',
          'remove a node\'s attachment, even one kept because the node still has the volume staged (for a node that is gone)',
          (c) => c.positional('id', { type: 'string', demandOption: true }).positional('node', { type: 'string', demandOption: true }),
          async (a) => {
            const released = await releaseAttachment(open(), validateVolumeId(a.id), validateNodeName(a.node));
            print(released ? `released: ${a.id} from node ${a.node}` : `${a.id} was not attached to node ${a.node}`);
          },
        )
        .demandCommand(1, 'name a volume command: create, delete, list, inspect or release'),
    )
    .command('node', 'the nodes the catalog knows (ControllerPublishVolume to any other is NOT_FOUND)', (y) =>
      y
        .command(
          'list',
          'list registered nodes: CSI node servers, and nodes a FlexVolume attach named',
          (c) => c.option('json', { type: 'boolean', default: false }),
          async (a) => {
            const nodes = await listNodes(open());
            if (a.json) print(nodes);
            else if (!nodes.length) print('no nodes');
            else for (const n of nodes) print(describeNode(n));
          },
        )
        .demandCommand(1, 'name a node command: list'),
    )
    .demandCommand(1)
    .strict()
    .help()
    .version(false)
    .fail((msg, err) => {
      // Throwing is what stops yargs: a fail handler that returns lets the command run anyway, so a
      // rejected --access or an unknown --data-root once still created the volume.
      throw err ?? new UsageError(msg);
    });
  try {
    await parser.parseAsync();
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`twinvol: ${err.message.replace(/\s+/g, ' ').trim()} (see: twinvol --help)\n`);
      return 2;
    }
    process.stderr.write(`twinvol: ${asTwinvolError(err).message}\n`);
    return 1;
  }
  return 0;
}

/** A command line that does not parse: exit 2, one line, before anything is touched. */
class UsageError extends Error {}

function print(value: unknown): void {
  process.stdout.write(typeof value === 'string' ? `${value}\n` : `${JSON.stringify(value, null, 2)}\n`);
}

function describeNode(n: NodeRecord): string {
  const topology = Object.entries(n.topology).map(([k, v]) => `${k}=${v}`);
  return `${n.nodeId}\t${n.registeredBy}\t${n.registeredAt}\t${topology.join(',') || '-'}`;
}

function describe(v: VolumeRecord): string {
  const where = v.attachments.length ? `attached to ${v.attachments.map((a) => (a.fenced ? `${a.node} (detached, still staged there)` : a.node)).join(', ')}` : 'not attached';
  const size = v.capacityBytes ? formatSize(v.capacityBytes) : '-';
  return `${v.id}\t${v.backend}\t${size}\t${v.fsType || '-'}\t${v.access}\t${where}`;
}
