import yargs, { type Argv } from 'yargs';
import { VENDOR_VERSION } from '../csi/version.js';
import { asTwinvolError, checkVolumeSpec, type Config, type Core, createVolume, DEFAULT_CONFIG_PATH, DEFAULT_CSI_DRIVER_NAME, deleteVolume, validateCsiDriverName, failedPrecondition, formatSize, inventory, listNodes, listVolumes, type NodeRecord, notFound, openCore, parseSize, redact, releaseAttachment, validateBackend, validateNodeName, validateVolumeId, type VolumeRecord } from '../shared/index.js';
import type { CheckOptions } from './check.js';
import { statusLines } from './status.js';
import { stepProgress } from './progress.js';
import { checkedNode } from './node-shebang.js';
import { configText, DEFAULT_FLEX_PLUGIN_DIR, DEFAULT_VENDOR, existingConfigError, installFlex, installTarget, type InstallTarget, runningExecutable, uninstallFlex } from './install.js';
import { isSea, type loadPacked } from './packed-modules.js';
import { asList, checkedWords, cliConfig, ConfigError, flagBeforeCommand, oneLine, usable, UsageError } from './cli-input.js';
// The commands the usage line and a missing command name are flex/main.ts's (one added there is named here too).
import { ADMIN_COMMANDS } from './verb-names.js';

/**
 * The administrator's side of FlexVolume, which has no provisioning: volumes are made here before
 * PVs name them. Lives in the same executable as the driver (`twinvol volume ...`) so one file is
 * installed; kubelet never sends the verb "volume".
 */
export async function runCli(argv: readonly string[], load?: typeof loadPacked): Promise<number> {
  let exitCode = 0;
  let config: Config | undefined;
  let core: Core | undefined;
  const settings = () => (config ??= cliConfig());
  const open = () => (core ??= openCore(settings()));
  // The commands whose next word is a command of their own (flagBeforeCommand), named where each is made.
  const groups = new Set<string>();
  const group = (name: string) => (groups.add(name), name);
  const parser = yargs([...argv])
    .scriptName('twinvol')
    // --help and --version return rather than exit, so flex/main.ts can still report output that could not be written.
    .exitProcess(false)
    .usage(
      `$0 ${ADMIN_COMMANDS.join('|')} ...\n\nThe administrator's side of the twinvol FlexVolume driver. kubelet runs this same file with its own verbs (init, attach, mount, ...) and reads one JSON reply; those are not for a terminal.\nSettings come from ${DEFAULT_CONFIG_PATH} (or TWINVOL_CONFIG) and TWINVOL_DATA_ROOT, TWINVOL_STATE_DIR, TWINVOL_KUBELET_DIR, TWINVOL_NODE_NAME.\nExit codes: 0 done, 1 refused or failed, 2 a command line that does not parse (nothing was touched).`,
    )
    .command(group('volume'), 'create, delete, list and inspect volumes in the catalog', (y) =>
      y
        .command(
          'create <id>',
          'create a volume',
          (c) =>
            c
              .positional('id', { type: 'string', demandOption: true, describe: 'volume id (letters, digits, . _ -; at most 128 bytes)' })
              .option('backend', { requiresArg: true, choices: ['block', 'dir', 'static'] as const, default: 'block' as const })
              .option('size', { requiresArg: true, type: 'string', describe: 'capacity, e.g. 1Gi (required for block and dir)' })
              .option('fs-type', { requiresArg: true, type: 'string', describe: 'block: ext4 or xfs; static: the source filesystem type' })
              .option('access', { requiresArg: true, choices: ['single-node', 'multi-node'] as const, default: 'single-node' as const })
              .option('source', { requiresArg: true, type: 'string', describe: 'static: what to mount (tmpfs, /path/to/image, host:/export)' })
              .option('mount-options', { requiresArg: true, type: 'string', describe: 'static: comma-separated mount options' })
              .option('json', { type: 'boolean', default: false }),
          async (a) => {
            // Every value is checked before the catalog is opened, so a refused command touches nothing.
            // The core's own checks of a new volume (which backend needs a size, which filesystem fits).
            const spec = usable(() => {
              const wanted = {
                id: validateVolumeId(a.id),
                backend: validateBackend(a.backend),
                capacityBytes: a.size === undefined ? 0 : parseSize(a.size, '--size'),
                fsType: a['fs-type'],
                access: a.access,
                source: a.source,
                mountOptions: a['mount-options'],
                createdBy: 'cli' as const,
              };
              checkVolumeSpec(settings(), wanted);
              return wanted;
            });
            // A large block volume takes seconds (image, mkfs): a terminal sees which step it is in.
            const progress = stepProgress();
            const { volume, created } = await createVolume(open(), spec, progress.step).finally(() => progress.done());
            print(a.json ? volume : `${created ? 'created' : 'exists'}: ${describe(volume)}`);
          },
        )
        .command(
          'delete <id>',
          'delete a volume and its data (refused while attached; a volume that does not exist is already gone)',
          (c) => c.positional('id', { type: 'string', demandOption: true }),
          async (a) => {
            const id = usable(() => validateVolumeId(a.id));
            print((await deleteVolume(open(), id)) ? `deleted: ${id}` : `already gone: volume ${id} does not exist`);
          },
        )
        .command(
          'list',
          'list volumes',
          (c) => c.option('json', { type: 'boolean', default: false }),
          async (a) => {
            const { volumes, unreadable } = await listVolumes(open());
            if (a.json) print(volumes);
            else if (!volumes.length && !unreadable.length) print('no volumes');
            else if (volumes.length) for (const line of [VOLUME_HEADER, ...volumes.map(describe)]) print(line);
            // stdout stays the list (JSON too); each record left out is one line on stderr, and exit 1.
            for (const u of unreadable) process.stderr.write(`twinvol: volume ${u.id} left out: ${oneLine(u.reason)}\n`);
            if (unreadable.length) exitCode = 1;
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
          'release <id> [node-name]',
          "remove a node's attachment, even one kept because the node still has the volume staged, for a node that is gone: needs --force, and is refused for this node while it still has the volume mounted here",
          (c) =>
            c
              .positional('id', { type: 'string', demandOption: true })
              // Not named `node`: yargs would fold --node into it and silently keep one of two nodes given.
              .positional('node-name', { type: 'string', describe: 'the node (or --node)' })
              .option('node', { requiresArg: true, type: 'string', describe: 'the node whose attachment goes (by position or as --node NODE)' })
              .option('force', { type: 'boolean', default: false, describe: 'yes: whatever that node still writes is no longer kept from other nodes' }),
          async (a) => {
            const { id, node } = usable(() => {
              const named = a['node-name'] ?? a.node;
              if (named === undefined) throw new UsageError('name the node: volume release <id> --node <node> --force');
              if (a['node-name'] !== undefined && a.node !== undefined) throw new UsageError('name the node once: as volume release <id> <node> or with --node');
              return { id: validateVolumeId(a.id), node: validateNodeName(named) };
            });
            const volume = await open().catalog.requireVolume(id);
            if (!volume.attachments.some((x) => x.node === node)) return print(`${id} was not attached to node ${node}`);
            if (!a.force)
              throw failedPrecondition(`releasing ${id} from node ${node} lets other nodes attach it while ${node} may still write to it; if ${node} is gone, run again with --force`);
            const released = await releaseAttachment(open(), id, node);
            print(released ? `released: ${id} from node ${node}` : `${id} was not attached to node ${node}`);
          },
        )
        .demandCommand(1, 'name a volume command: create, delete, list, inspect or release'),
    )
    .command(group('node'), 'the nodes the catalog knows (ControllerPublishVolume to any other is NOT_FOUND)', (y) =>
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
    .command(
      'status',
      'what this node and the catalog hold (volumes, attachments, nodes, mounts, loop devices) and everything that does not agree; exit 1 when something does not',
      (c) =>
        c
          .option('json', { type: 'boolean', default: false })
          .option('driver-name', { requiresArg: true, type: 'string', default: DEFAULT_CSI_DRIVER_NAME, describe: "the CSI driver name twinvol-csi serves here (kubelet's staging paths carry it)" }),
      async (a) => {
        const csiDriverName = validateCsiDriverName(a['driver-name'], '--driver-name');
        const found = await inventory(open(), { csiDriverName });
        if (a.json) print(found);
        else for (const line of statusLines(found)) print(line);
        if (!found.consistent) exitCode = 1;
      },
    )
    .command(group('install'), 'install this executable as a FlexVolume driver on this node', (y) =>
      y
        .command(
          'flex',
          'copy this executable to <plugin-dir>/<vendor>~twinvol/twinvol, atomically (kubelet probes the directory on every change), and write the config file; a no-op when both are already in place',
          (c) =>
            targetOptions(c)
              .option('config', {
                type: 'string',
                requiresArg: true,
                describe: `the settings to write to ${DEFAULT_CONFIG_PATH} (or TWINVOL_CONFIG): JSON text, or a file holding it`,
              })
              .option('node', {
                type: 'string',
                requiresArg: true,
                describe: 'a bundle only: the Node.js its first line names (e.g. /usr/bin/node), instead of the one env finds on kubelet\'s PATH; one exec fewer per call',
              }),
          async (a) => {
            const target = usable(() => targetOf(a));
            const config = a.config === undefined ? undefined : usable(() => configText(a.config ?? ''));
            if (typeof config === 'object') throw new UsageError(config.error);
            const configPath = process.env.TWINVOL_CONFIG || DEFAULT_CONFIG_PATH;
            // Given --config, the operator's new config replaces the file; without, the file kept must load.
            const kept = config === undefined ? existingConfigError(configPath) : undefined;
            if (kept) throw new ConfigError(kept);
            const node = a.node === undefined ? undefined : await nodeFor(a.node);
            const r = installFlex(target, runningExecutable(), {
              ...(config === undefined ? {} : { config: { text: config, path: configPath } }),
              ...(node === undefined ? {} : { node }),
            });
            if (r.modules) print(`${r.modules.changed ? 'installed' : 'unchanged'}: ${r.modules.path} (the commands kubelet never runs)`);
            if (r.addon) print(`${r.addon.changed ? 'installed' : 'unchanged'}: ${r.addon.path} (mount(2) for the driver)`);
            print(`${r.driver.changed ? 'installed' : 'unchanged'}: ${r.driver.path} (kubelet driver ${target.vendor}/twinvol)`);
            if (r.config) print(`${r.config.changed ? 'written' : 'unchanged'}: ${r.config.path}`);
          },
        )
        .demandCommand(1, 'name what to install: flex'),
    )
    .command(group('uninstall'), 'remove what install put on this node', (y) =>
      y
        .command(
          'flex',
          'remove <plugin-dir>/<vendor>~twinvol/twinvol; refused while twinvol volumes are mounted on this node, whose teardown needs it (the config file stays)',
          (c) => targetOptions(c).option('force', { type: 'boolean', default: false, describe: 'remove it even while volumes are mounted' }),
          async (a) => {
            const target = usable(() => targetOf(a));
            const r = await uninstallFlex(open(), target, a.force);
            print(r.removed ? `removed: ${r.path}${r.mounts ? ` (forced: ${r.mounts} mount${r.mounts === 1 ? '' : 's'} still in place)` : ''}` : `already gone: ${r.path} was not installed`);
          },
        )
        .demandCommand(1, 'name what to uninstall: flex'),
    )
    .command(group('flex'), 'check a FlexVolume driver before it moves behind twinvol-csi', (y) =>
      y
        .command(
          'check <driver>',
          "run a FlexVolume driver's init and its whole lifecycle, twice, in a scratch kubelet dir, and say whether it runs under kubelet, behind twinvol-csi (with which flags), or not; exit 0 only when it runs under kubelet as it is",
          (c) =>
            c
              .positional('driver', { type: 'string', demandOption: true, describe: 'the driver executable (kubelet: <plugin-dir>/<vendor>~<name>/<name>)' })
              .option('options', { requiresArg: true, type: 'string', describe: "a PV's flexVolume.options, as a JSON object of strings" })
              .option('attachable', { type: 'boolean', default: false, describe: 'the driver must report attach (attach, waitforattach, mountdevice, ... are checked)' })
              .option('json', { type: 'boolean', default: false, describe: 'one JSON object instead of lines' })
              .option('timeout-ms', { requiresArg: true, type: 'number', describe: 'deadline of each driver call (default 60000)' })
              .option('node', { requiresArg: true, type: 'string', describe: "the node attach and detach name (default: this host's name); twinvol's own driver attaches only to its config's nodeName" }),
          async (a) => {
            // flex/check.ts runs drivers through execa: packed on its own, loaded only here (scripts/build.mjs).
            if (!load) throw new Error('flex check is only available in the built executable');
            const check = load<typeof import('./check.js')>('check');
            const usage: CheckOptions | string = check.checkUsage({ driver: a.driver, options: a.options, attachable: a.attachable, json: a.json, timeoutMs: a['timeout-ms'], node: a.node });
            if (typeof usage === 'string') throw new UsageError(usage);
            exitCode = await check.runCheck(usage);
          },
        )
        .demandCommand(1, 'name a flex command: check'),
    )
    .command(
      'compare',
      'run the same workload through both plugin models on this node (the FlexVolume executable as kubelet runs it, a private twinvol-csi as the sidecars and kubelet call it) in a scratch world removed afterwards: latency, processes and tools per step, and any difference in the resulting mounts',
      (c) =>
        c
          .option('backend', { requiresArg: true, type: 'string', default: 'all', describe: 'dir, block, static or all' })
          .option('rounds', { requiresArg: true, type: 'number', default: 5, describe: 'lifecycles per model and backend' })
          .option('json', { type: 'boolean', default: false, describe: 'one JSON report instead of the table' })
          .option('html', { requiresArg: true, type: 'string', describe: 'also write the report as one self-contained HTML page to this file' })
          .option('csi-server', { requiresArg: true, type: 'string', describe: 'the twinvol-csi to start (default: beside this executable, or ../csi/twinvol-csi)' }),
      async (a) => {
        // Packed on its own (scripts/build.mjs): grpc loads only for this command.
        if (!load) throw new Error('compare is only available in the built executable');
        const compare = load<typeof import('./compare/index.js')>('compare');
        const usage = compare.compareUsage({ backend: a.backend, rounds: a.rounds, json: a.json, html: a.html, csiServer: a['csi-server'], flexBin: runningExecutable() });
        if (typeof usage === 'string') throw new UsageError(usage);
        exitCode = await compare.runCompareCommand(usage);
      },
    )
    .command(group('migrate'), 'move volumes from FlexVolume to CSI', (y) =>
      y
        .command(
          'plan [files..]',
          "plan the move of every FlexVolume PV in kubectl's output (files, or - for stdin) to CSI: the new PVs and claims as YAML on stdout, or with --out a directory of manifests, the originals for rollback, STEPS.md and migrate.sh; talks to no cluster; exit 0 all planned, 1 some skipped (each said why)",
          (c) =>
            c
              // Repeats make lists here (several files, several --mapping): the global setting keeps the last.
              .parserConfiguration({ 'duplicate-arguments-array': true })
              .positional('files', { type: 'string', array: true, describe: 'kubectl get pv,pvc,pods,deploy,sts,ds,cronjobs,secrets -A -o yaml (or -o json) output; - for stdin (the default)' })
              .option('prefer', { requiresArg: true, choices: ['exec', 'vendor'] as const, default: 'exec' as const, describe: "vendor: a driver with a built-in mapping (k8s/nfs, fstab/cifs, microsoft.com/smb, azure/blobfuse) moves to its vendor's CSI driver; exec: behind twinvol-csi's exec backend" })
              .option('mapping', { type: 'string', nargs: 1, default: [] as string[], coerce: asList, describe: 'a YAML file of mappings to other CSI drivers (applied whatever --prefer says); repeatable' })
              .option('exec', { type: 'boolean', default: true, describe: 'move drivers without a mapping behind the exec backend (--no-exec: skip them)' })
              .option('out', { requiresArg: true, type: 'string', describe: 'write numbered manifests, rollback/, pods/ (bare pods to re-create, if any), STEPS.md, migrate.sh and rollback.sh to this new or empty directory' }),
          async (a) => {
            // flex/migrate/ parses YAML: packed on its own (scripts/build.mjs), loaded only here.
            if (!load) throw new Error('migrate plan is only available in the built executable');
            const migrate = load<typeof import('./migrate/index.js')>('migrate');
            exitCode = migrate.runMigratePlan({ files: a.files ?? [], prefer: a.prefer, mappings: a.mapping, exec: a.exec, ...(a.out !== undefined ? { out: a.out } : {}) });
          },
        )
        .command(
          'verify <volume>',
          'on this node, bring a volume up through FlexVolume as kubelet would, then through the CSI server, then through FlexVolume again (read-only), and compare checksums of its data; refused while the volume is in use; exit 0 only when all three match',
          (c) =>
            c
              .positional('volume', { type: 'string', demandOption: true, describe: "the volume id (the CSI PV's volumeHandle)" })
              .option('pv', { requiresArg: true, type: 'string', describe: 'the old FlexVolume PV (YAML or JSON): its driver, options and fsType' })
              .option('csi-endpoint', { requiresArg: true, type: 'string', describe: 'a running CSI server (unix:///path); default: a private twinvol-csi on a temporary socket' })
              .option('csi-bin', { requiresArg: true, type: 'string', describe: 'the twinvol-csi to start (default: beside this executable, or ../csi/twinvol-csi)' })
              .option('plugin-dir', { requiresArg: true, type: 'string', default: DEFAULT_FLEX_PLUGIN_DIR, describe: "kubelet's --volume-plugin-dir, where an exec volume's driver is" })
              .option('vendor', { requiresArg: true, type: 'string', default: DEFAULT_VENDOR, describe: 'twinvol is <vendor>/twinvol in the PVs' })
              .option('json', { type: 'boolean', default: false, describe: 'one JSON object instead of lines' }),
          async (a) => {
            // Packed on its own (scripts/build.mjs): grpc and execa load only for this command.
            if (!load) throw new Error('migrate verify is only available in the built executable');
            const verify = load<typeof import('./migrate/verify.js')>('verify');
            // Checked as install's are: unchecked, `--vendor ../x` reached the driver's name and failed there, exit 1.
            const { pluginDir, vendor } = usable(() => targetOf(a));
            const usage = verify.verifyUsage({ volume: a.volume, pv: a.pv, csiEndpoint: a['csi-endpoint'], csiBin: a['csi-bin'], pluginDir, vendor, json: a.json, self: runningExecutable() });
            if (typeof usage === 'string') throw new UsageError(usage);
            exitCode = await verify.runVerify(usage, settings());
          },
        )
        .demandCommand(1, 'name a migrate command: plan or verify'),
    )
    .demandCommand(1, `name a command: ${ADMIN_COMMANDS.slice(0, -1).join(', ')} or ${ADMIN_COMMANDS.at(-1)}`)
    // A flag given twice takes its last value, as in most tools, rather than becoming an array that
    // every check downstream would have to expect. Every option that takes a value says
    // `requiresArg`: yargs gives a flag left without one its default, silently, so an unquoted empty
    // $DIR in `uninstall flex --plugin-dir $DIR` went to kubelet's default plugin dir.
    .parserConfiguration({ 'duplicate-arguments-array': false })
    .middleware(checkedWords(argv), true)
    .strict()
    .help()
    .alias('help', 'h')
    .version('version', 'print the version', `twinvol ${VENDOR_VERSION}`)
    .fail((msg, err) => {
      // Throwing is what stops yargs: a fail handler that returns lets the command run anyway, so a
      // rejected --access or an unknown --data-root once still created the volume.
      // yargs' own parse errors (a flag with no value: "Not enough arguments following") come as a
      // YError, not a message: usage errors too, not failures of the command.
      throw err && err.name !== 'YError' ? err : new UsageError(msg ?? err?.message ?? 'the command line does not parse');
    });
  try {
    flagBeforeCommand(argv, groups);
    await parser.parseAsync();
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`twinvol: ${oneLine(err.message)}${err instanceof ConfigError ? '' : ' (see: twinvol --help)'}\n`);
      return 2;
    }
    const e = asTwinvolError(err);
    process.stderr.write(`twinvol: ${oneLine(e.message)}${e.code === 'InvalidArgument' ? ' (see: twinvol --help)' : ''}\n`);
    // A value the core refused as invalid is a usage error too; the core refuses before it touches anything.
    return e.code === 'InvalidArgument' ? 2 : 1;
  }
  return exitCode;
}

function targetOptions<T>(c: Argv<T>) {
  return c
    .option('plugin-dir', { requiresArg: true, type: 'string', default: DEFAULT_FLEX_PLUGIN_DIR, describe: "kubelet's --volume-plugin-dir" })
    .option('vendor', { requiresArg: true, type: 'string', default: DEFAULT_VENDOR, describe: 'the driver is <vendor>/twinvol in a PV' });
}

/** `--node`: a bundle's, checked by running it (flex/node-shebang.ts); a single executable carries its own Node. */
async function nodeFor(path: string): Promise<string> {
  if (isSea()) throw new UsageError('--node is for the bundle: a single executable carries its own Node.js');
  const node = await checkedNode(path);
  if (typeof node === 'object') throw new UsageError(node.error);
  return node;
}

function targetOf(a: { 'plugin-dir': string; vendor: string }): InstallTarget {
  const target = installTarget(a['plugin-dir'], a.vendor);
  if (typeof target === 'string') throw new UsageError(target);
  return target;
}

const VOLUME_HEADER = 'ID\tBACKEND\tSIZE\tFSTYPE\tACCESS\tATTACHMENTS';

/**
 * Records go out through shared/log.ts `redact`, as they would to a log: a static volume's mountOptions
 * may hold a CIFS password, and `status --json` or `volume inspect` is what gets pasted into an issue.
 */
function print(value: unknown): void {
  process.stdout.write(typeof value === 'string' ? `${value}\n` : `${JSON.stringify(redact(value), null, 2)}\n`);
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
