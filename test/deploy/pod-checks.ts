import type { IContainer } from 'kubernetes-models/v1';
import type { Flags } from '../../csi/flags.js';
import { isObject, type JsonObject } from './load.js';
import { expandedArgs, flagValue, hasFlag, hostPathOf, imageName, isPlugin, locate, NODE_NAME, pluginFlags, type Workload, workloads } from './pods.js';

/** Sidecars that dial the plugin's socket, by image name. */
const DIALS_SOCKET = ['csi-provisioner', 'csi-attacher', 'csi-resizer', 'csi-snapshotter', 'csi-node-driver-registrar', 'livenessprobe'];
/** Sidecars that act on the API and so must elect a leader when the controller has replicas. */
const ELECTS_LEADER = ['csi-provisioner', 'csi-attacher', 'csi-resizer', 'csi-snapshotter'];
/** The twinvol install command the FlexVolume installer runs (issue 11, item 2). */
export const FLEX_INSTALL = 'twinvol install flex --plugin-dir /flexmnt --vendor twinvol';

interface Plugin {
  w: Workload;
  c: IContainer;
  flags: Flags;
}

/** The kubelet dir, written once: the twinvol-settings ConfigMap (deploy/settings.yaml). */
export function settingsKubeletDir(docs: readonly JsonObject[]): string | undefined {
  const cm = docs.find((d) => d.kind === 'ConfigMap' && isObject(d.metadata) && d.metadata.name === 'twinvol-settings');
  const value = cm && isObject(cm.data) ? cm.data.kubeletDir : undefined;
  return typeof value === 'string' ? value : undefined;
}

function plugins(docs: readonly JsonObject[]): { plugins: Plugin[]; problems: string[] } {
  const out: Plugin[] = [];
  const problems: string[] = [];
  for (const w of workloads(docs))
    for (const c of w.spec.containers.filter(isPlugin)) {
      try {
        out.push({ w, c, flags: pluginFlags(c) });
      } catch (err) {
        problems.push(`${w.kind}/${w.name}: twinvol-csi refuses its args: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  return { plugins: out, problems };
}

/** Every sidecar of the plugin's pod dials the file the plugin listens on. */
function socketProblems({ w, c, flags }: Plugin): string[] {
  const problems: string[] = [];
  const where = `${w.kind}/${w.name}`;
  const socket = locate(w.spec, c, flags.socketPath);
  if (!socket) return [`${where}: the plugin's socket ${flags.socketPath} is on no volume the sidecars can share`];
  for (const s of w.spec.containers.filter((x) => DIALS_SOCKET.includes(imageName(x) ?? ''))) {
    const address = flagValue(expandedArgs(s), '--csi-address');
    const dialled = address === undefined ? undefined : locate(w.spec, s, address.replace(/^unix:\/\//, ''));
    if (dialled !== socket) problems.push(`${where}: ${s.name} dials ${address ?? '(no --csi-address)'} (${dialled ?? 'not a shared volume'}), the plugin listens on ${socket}`);
  }
  return problems;
}

/** One mount of the kubelet dir, at the same path, Bidirectional; the registrar's paths under it. */
function nodeProblems({ w, c, flags }: Plugin, kubeletDir: string | undefined, driverName: string): string[] {
  const problems: string[] = [];
  const say = (what: string) => problems.push(`${w.kind}/${w.name}: ${what}`);
  if (w.kind !== 'DaemonSet') say('the node plugin runs as a DaemonSet');
  if (c.securityContext?.privileged !== true) say('the node plugin must be privileged');
  if (flags.overrides.nodeName !== NODE_NAME) say('--node-id must come from spec.nodeName (downward API)');
  if (hostPathOf(w.spec, c, '/dev') !== '/dev') say("the node plugin must see the host's /dev at /dev");
  for (const [flag, dir] of [['--data-root', flags.overrides.dataRoot], ['--state-dir', flags.overrides.stateDir]] as const)
    if (!dir || hostPathOf(w.spec, c, dir) !== dir) say(`${flag} ${dir ?? '(unset)'} must be a hostPath mounted at the same path`);
  if (!kubeletDir) return [...problems, 'no kubeletDir in the twinvol-settings ConfigMap'];
  if (flags.overrides.kubeletDir !== kubeletDir) say(`--kubelet-dir ${flags.overrides.kubeletDir ?? '(unset)'} is not the kubelet dir ${kubeletDir}`);
  const mount = c.volumeMounts?.find((m) => m.mountPath === kubeletDir);
  if (!mount || hostPathOf(w.spec, c, kubeletDir) !== kubeletDir) say(`the kubelet dir ${kubeletDir} must be mounted from the host at the same path`);
  else if (mount.mountPropagation !== 'Bidirectional') say('the kubelet dir must be mounted with Bidirectional propagation');
  for (const v of w.spec.volumes ?? [])
    if (v.hostPath && v.hostPath.path !== kubeletDir && v.hostPath.path.startsWith(`${kubeletDir}/`)) say(`volume ${v.name} repeats the kubelet dir (${v.hostPath.path}): use a subPath of the kubelet dir's volume`);
  const want = `${kubeletDir}/plugins/${driverName}/csi.sock`;
  if (hostPathOf(w.spec, c, flags.socketPath) !== want) say(`the plugin listens on ${flags.socketPath}, not on the host's ${want}`);
  const registrar = w.spec.containers.find((x) => imageName(x) === 'csi-node-driver-registrar');
  if (!registrar) return [...problems, `${w.kind}/${w.name}: no node-driver-registrar`];
  const registration = flagValue(expandedArgs(registrar), '--kubelet-registration-path');
  if (registration !== want) say(`--kubelet-registration-path ${registration ?? '(unset)'} is not the socket kubelet must dial, ${want}`);
  if (hostPathOf(w.spec, registrar, '/registration') !== `${kubeletDir}/plugins_registry`) say(`the registrar's /registration must be the host's ${kubeletDir}/plugins_registry`);
  return problems;
}

function leaderProblems(w: Workload): string[] {
  return w.spec.containers
    .filter((s) => ELECTS_LEADER.includes(imageName(s) ?? ''))
    .filter((s) => !hasFlag(s.args ?? [], '--leader-election') || (s.args ?? []).includes('--leader-election=false'))
    .map((s) => `${w.kind}/${w.name}: ${s.name} runs without --leader-election`);
}

function flexInstallerProblems(docs: readonly JsonObject[]): string[] {
  const found = workloads(docs).flatMap((w) => w.spec.containers.filter((c) => (c.command ?? []).join(' ').includes(FLEX_INSTALL)).map((c) => ({ w, c })));
  if (found.length !== 1) return [`one container must run \`${FLEX_INSTALL}\`, not ${found.length}`];
  const { w, c } = found[0] as { w: Workload; c: IContainer };
  const problems = w.kind === 'DaemonSet' ? [] : [`${w.kind}/${w.name}: the FlexVolume installer runs on every node, as a DaemonSet`];
  if (!hostPathOf(w.spec, c, '/flexmnt')) problems.push(`${w.kind}/${w.name}: /flexmnt must be the host's FlexVolume plugin dir`);
  return problems;
}


/**
 * The exec backend runs FlexVolume drivers from --flex-plugin-dir on both sides (attach and detach on
 * the controller, the rest on the node), so where exec volumes exist both plugins see that directory
 * at the same path as the host; with --flex-exec=host the driver runs in pid 1's namespaces
 * (shared/backends/exec-driver.ts), which needs the host's pids and privilege.
 */
function execProblems({ w, c, flags }: Plugin, hasExecVolumes: boolean): string[] {
  const problems: string[] = [];
  const say = (what: string) => problems.push(`${w.kind}/${w.name}: ${what}`);
  const dir = flags.exec.pluginDir;
  if ((hasExecVolumes || flags.exec.execIn === 'host') && hostPathOf(w.spec, c, dir) !== dir) say(`FlexVolume drivers run from ${dir}, which must be the host's, at the same path`);
  if (flags.exec.execIn === 'host') {
    if (w.spec.hostPID !== true) say('--flex-exec=host enters pid 1 of the host: hostPID must be true');
    if (c.securityContext?.privileged !== true) say('--flex-exec=host enters the host namespaces: the plugin must be privileged');
  }
  return problems;
}

const isExecVolume = (d: JsonObject) =>
  (d.kind === 'StorageClass' && isObject(d.parameters) && d.parameters.backend === 'exec') ||
  (d.kind === 'PersistentVolume' && isObject(d.spec) && isObject(d.spec.csi) && isObject(d.spec.csi.volumeAttributes) && d.spec.csi.volumeAttributes.backend === 'exec');

/** Sockets, the kubelet dir, the node plugin's needs, the data root both sides share, leader election, drivers for the exec backend. */
export function podProblems(docs: readonly JsonObject[], driverName: string): string[] {
  const { plugins: found, problems } = plugins(docs);
  const kubeletDir = settingsKubeletDir(docs);
  const node = found.filter((p) => p.flags.mode === 'node');
  const controller = found.filter((p) => p.flags.mode === 'controller');
  if (node.length !== 1 || controller.length !== 1) problems.push(`deploy/ must run one node plugin and one controller, not ${node.length} and ${controller.length}`);
  for (const p of found) problems.push(...socketProblems(p), ...execProblems(p, docs.some(isExecVolume)));
  for (const p of node) problems.push(...nodeProblems(p, kubeletDir, driverName));
  for (const p of controller) {
    if (p.w.kind !== 'Deployment') problems.push(`${p.w.kind}/${p.w.name}: the controller runs as a Deployment`);
    problems.push(...leaderProblems(p.w));
    const root = p.flags.overrides.dataRoot;
    const host = root ? hostPathOf(p.w.spec, p.c, root) : undefined;
    for (const n of node)
      if (!host || host !== (n.flags.overrides.dataRoot && hostPathOf(n.w.spec, n.c, n.flags.overrides.dataRoot)))
        problems.push(`${p.w.kind}/${p.w.name}: its data root (${host ?? 'not a hostPath'}) is not the node plugin's: one catalog serves both`);
    for (const n of node)
      if (n.flags.overrides.dataRootOnNetwork !== p.flags.overrides.dataRootOnNetwork)
        problems.push(`${p.w.kind}/${p.w.name}: --data-root-on-network is not the node plugin's: both see one data root`);
  }
  problems.push(...flexInstallerProblems(docs));
  return problems;
}
