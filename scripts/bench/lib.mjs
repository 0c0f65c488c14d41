// What the benchmark modules (scripts/bench/*.mjs, run by scripts/bench.mjs) share: statistics, a
// scratch world, processes started with a clean environment, a CSI client, and the row format.
// This file exports no `suite`, so scripts/bench.mjs does not run it as one.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { createHash } from 'node:crypto';

const require = createRequire(import.meta.url);
const grpc = require('@grpc/grpc-js');
const { loadSync } = require('@grpc/proto-loader');

export const ROOT = resolve(import.meta.dirname, '../..');
export const FLEX_BIN = join(ROOT, 'dist/flex/twinvol');
export const CSI_BIN = join(ROOT, 'dist/csi/twinvol-csi');
export const BARE_SERVER = join(ROOT, 'scripts/bench/bare-grpc-server.cjs');

export const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};
export const median = (xs) => quantile(xs, 0.5);

/**
 * One row of the table. `ratio` is value / reference (or, for a throughput, how many times the
 * reference's): every row is read as a ratio measured side by side in the same run.
 */
export function row(id, name, value, unit, reference, referenceName, extra = {}) {
  return { id, name, value, unit, reference, referenceName, ratio: reference > 0 ? value / reference : 0, ...extra };
}

/** Alternates the contenders round by round (reversed every other round) so machine noise hits all alike. */
export async function interleaved(contenders, rounds) {
  const samples = contenders.map(() => []);
  for (const c of contenders) await c(); // warm the page cache and the JIT
  for (let i = 0; i < rounds; i++) {
    const order = i % 2 ? [...contenders.keys()].reverse() : [...contenders.keys()];
    for (const k of order) {
      samples[k].push(await contenders[k]());
      // Contenders timed with spawnSync never give the event loop a turn: this one lets a Ctrl-C or
      // SIGTERM reach the handler below between samples instead of after the whole suite.
      await new Promise((r) => setImmediate(r));
    }
  }
  return samples;
}

/**
 * NODE_EXTRA_CA_CERTS makes every Node start read a CA bundle (about 30 ms here): no contender gets it.
 * The sbin directories are on the PATH as kubelet's are; nothing else of the caller's environment leaks in.
 */
export const BASE_ENV = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' };

/**
 * A private world: data root on the disk (the catalog's fsyncs are real), node state on a tmpfs as
 * docs/architecture.md says it lives, kubelet dir on the disk. `cleanup` unmounts, detaches loop
 * devices and removes everything, whatever state a failed run left.
 */
export function makeScratch(prefix) {
  const root = mkdtempSync(`/tmp/twinvol-bench-${prefix}-`);
  live.add(root);
  const dataRoot = join(root, 'data');
  const stateDir = join(root, 'state');
  const kubeletDir = join(root, 'kubelet');
  // kubelet's --volume-plugin-dir, where the exec backend finds third-party drivers (scripts/bench/csi-exec.mjs).
  const pluginDir = join(root, 'plugins');
  for (const d of [dataRoot, stateDir, kubeletDir, pluginDir]) mkdirSync(d, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m,mode=0700', 'tmpfs', stateDir]);
  const configPath = join(root, 'config.json');
  writeFileSync(configPath, '{}\n');
  const env = { ...BASE_ENV, TWINVOL_CONFIG: configPath, TWINVOL_DATA_ROOT: dataRoot, TWINVOL_STATE_DIR: stateDir, TWINVOL_KUBELET_DIR: kubeletDir, TWINVOL_NODE_NAME: 'bench' };
  return {
    root, dataRoot, stateDir, kubeletDir, pluginDir, configPath, env,
    cleanup: () => {
      releaseUnder(root);
      live.delete(root);
    },
  };
}

/**
 * Worlds not yet cleaned up: released on Ctrl-C or SIGTERM too, or an interrupted run would leave its
 * tmpfs and loop devices mounted under /tmp (it did). releaseUnder is synchronous, so it runs whole.
 */
const live = new Set();
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]])
  process.once(signal, () => {
    process.stderr.write(`bench: ${signal}: releasing ${live.size} scratch world(s)\n`);
    for (const root of live) releaseUnder(root);
    process.exit(code);
  });

function mountsUnder(root) {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4]?.replace(/\\040/g, ' '))
    .filter((p) => p && (p === root || p.startsWith(`${root}/`)))
    .sort((a, b) => b.length - a.length);
}

export function releaseUnder(root) {
  for (let pass = 0; pass < 5; pass++) {
    const mounts = mountsUnder(root);
    if (!mounts.length) break;
    for (const m of mounts) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
  }
  for (const name of readdirSync('/sys/block').filter((n) => n.startsWith('loop'))) {
    let backing = '';
    try {
      backing = readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').trim();
    } catch {
      continue; // not bound
    }
    if (backing.startsWith(`${root}/`)) spawnSync('losetup', ['-d', `/dev/${name}`], { stdio: 'ignore' });
  }
  rmSync(root, { recursive: true, force: true });
}

/** Milliseconds one process takes from spawn to exit; a failed call throws rather than counting as fast. */
export function timeSpawn(cmd, args, env, check) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'], cwd: '/' });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${cmd} ${args[0] ?? ''} failed (${r.status}): ${r.stdout}${r.stderr}`);
  if (check) check(`${r.stdout}${r.stderr}`);
  return ms;
}

/** A FlexVolume call's reply must be one JSON document saying Success (kubelet reads it so). */
export function flexOk(args) {
  return (out) => {
    const reply = JSON.parse(out);
    if (reply.status !== 'Success') throw new Error(`flex ${args[0]} answered ${out}`);
  };
}

const definition = loadSync(join(ROOT, 'csi/proto/csi.proto'), { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const csi = grpc.loadPackageDefinition(definition).csi.v1;

/** A client for every CSI service at one socket; `call` resolves with the reply, rejects with the status. */
export function csiClient(socket) {
  const clients = new Map();
  // A full listing of 10,000 volumes is one reply of a few MiB, above grpc-js's 4 MiB default.
  const options = { 'grpc.max_receive_message_length': 256 * 2 ** 20 };
  const clientFor = (service) => {
    if (!clients.has(service)) clients.set(service, new csi[service](`unix://${socket}`, grpc.credentials.createInsecure(), options));
    return clients.get(service);
  };
  return {
    call(service, method, request = {}) {
      const c = clientFor(service);
      return new Promise((done, fail) => c[method](request, { deadline: Date.now() + 60_000 }, (err, res) => (err ? fail(new Error(`${method}: ${err.details ?? err.message}`)) : done(res))));
    },
    close() {
      for (const c of clients.values()) c.close();
    },
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The Go reference driver, when the run was given one: kubernetes-csi's hostpathplugin (its volumes
 * are directories), built as the README's "Benchmarks" says. Not shipped, so a run without it skips
 * the rows that compare against it (scripts/bench/csi-reference.mjs).
 */
export const HOSTPATH_BIN = process.env.TWINVOL_BENCH_HOSTPATH || undefined;

/** The command line of a server of `kind` answering on `socket`. */
function serverCommand(kind, scratch, name, socket) {
  if (kind === 'twinvol')
    return [process.execPath, CSI_BIN, '--endpoint', `unix://${socket}`, '--node-id', 'bench', '--data-root', scratch.dataRoot, '--state-dir', scratch.stateDir, '--kubelet-dir', scratch.kubeletDir, '--flex-plugin-dir', scratch.pluginDir];
  if (kind === 'bare') return [process.execPath, BARE_SERVER, socket];
  // The bare server doing the durable minimum of a controller RPC, on the disk like twinvol's data root.
  if (kind === 'durable') return [process.execPath, BARE_SERVER, socket, '--durable', join(scratch.root, `${name}-durable`)];
  if (kind === 'hostpath') {
    // Its own state directory per server, on the disk like twinvol's data root; --enable-attach so
    // that it answers ControllerPublishVolume as twinvol does; -v 0 logs nothing per call.
    const state = join(scratch.root, `${name}-hostpath-state`);
    mkdirSync(state, { recursive: true });
    return [HOSTPATH_BIN, '--endpoint', `unix://${socket}`, '--nodeid', 'bench', '--statedir', state, '--enable-attach', '-v', '0'];
  }
  throw new Error(`no server of kind ${kind}`);
}

/**
 * Starts a server (`twinvol`, `bare`, `durable` or `hostpath`) on a socket in the scratch world and waits for
 * its first successful Probe, polling every millisecond; `coldMs` is spawn to that answer.
 */
export async function launch(kind, scratch, name) {
  const socket = join(scratch.root, `${name}.sock`);
  rmSync(socket, { force: true });
  const [command, ...args] = serverCommand(kind, scratch, name, socket);
  const t0 = process.hrtime.bigint();
  const child = spawn(command, args, { env: { ...scratch.env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise((r) => child.on('exit', r));
  const client = csiClient(socket);
  let coldMs;
  for (let i = 0; i < 20_000 && child.exitCode === null; i++) {
    if (existsSync(socket)) {
      // An unset `ready` means ready too (the CSI spec's ProbeResponse); the Go driver leaves it unset.
      const ready = await client.call('Identity', 'Probe').then((r) => r.ready?.value !== false, () => false);
      if (ready) {
        coldMs = Number(process.hrtime.bigint() - t0) / 1e6;
        break;
      }
    }
    await sleep(1);
  }
  const stop = async () => {
    client.close();
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  if (coldMs === undefined) {
    await stop();
    throw new Error(`${kind} server never answered Probe: ${stderr}`);
  }
  return { kind, child, client, socket, coldMs, stop, rssMb: () => rssMb(child.pid) };
}

/** Interleaved cold starts of servers of each kind: per kind, the milliseconds from spawn to the first Probe answered. */
export function coldStarts(kinds, scratch, rounds) {
  return interleaved(
    kinds.map((kind, k) => async () => {
      const srv = await launch(kind, scratch, `cold-${k}`);
      await srv.stop();
      return srv.coldMs;
    }),
    rounds,
  );
}

export function rssMb(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/** Where kubelet stages and publishes a CSI volume (test/csi/helpers/requests.ts lays them out the same). */
export function csiPaths(kubeletDir, id, pod) {
  const hash = createHash('sha256').update(id).digest('hex');
  return {
    staging: join(kubeletDir, 'plugins/kubernetes.io/csi/csi.twinvol.io', hash, 'globalmount'),
    target: join(kubeletDir, 'pods', pod, 'volumes/kubernetes.io~csi', id, 'mount'),
  };
}

export const MiB = 2 ** 20;

/** The volume kinds the lifecycles run: a directory, the default block volume (loop device, ext4), a FlexVolume driver's. */
const DIR_KIND = { parameters: { backend: 'dir' }, bytes: MiB, cap: { mount: { fs_type: '', mount_flags: [] }, access_mode: { mode: 'SINGLE_NODE_WRITER' } } };
export const KINDS = {
  dir: DIR_KIND,
  block: { parameters: { backend: 'block' }, bytes: 64 * MiB, cap: { mount: { fs_type: 'ext4', mount_flags: [] }, access_mode: { mode: 'SINGLE_NODE_WRITER' } } },
  // A third-party FlexVolume driver's volume (scripts/bench/csi-exec.mjs installs the driver).
  exec: { ...DIR_KIND, parameters: { backend: 'exec', driver: 'twinvol-bench/bind' } },
  // The Go driver's directories, asked for as twinvol's are: its parameters are its own, and it has no `backend`.
  hostpath: { ...DIR_KIND, parameters: {} },
};

/** The RPCs of one full CSI node lifecycle, in the order the CO makes them. */
export const LIFECYCLE = ['CreateVolume', 'ControllerPublishVolume', 'NodeStageVolume', 'NodePublishVolume', 'NodeGetVolumeStats', 'NodeUnpublishVolume', 'NodeUnstageVolume', 'ControllerUnpublishVolume', 'DeleteVolume'];

/**
 * One lifecycle of a volume created as `name` against a server; `timings` (if given) collects each
 * RPC's milliseconds by method. The bare server answers the same requests with canned replies.
 */
export async function lifecycle(server, scratch, kindName, name, timings) {
  const kind = KINDS[kindName];
  const t0 = performance.now();
  const create = { name, capacity_range: { required_bytes: String(kind.bytes) }, volume_capabilities: [kind.cap], parameters: kind.parameters };
  const created = await server.client.call('Controller', 'CreateVolume', create);
  if (timings) (timings.CreateVolume ??= []).push(performance.now() - t0);
  // The rest address the volume by the id the server chose, as a CO does (the Go driver's is a UUID).
  const id = created.volume.volume_id;
  const p = csiPaths(scratch.kubeletDir, id, `pod-${name}`);
  // What kubelet makes before it stages and publishes (the Go driver expects the target's parent).
  for (const path of [p.staging, p.target]) mkdirSync(dirname(path), { recursive: true });
  const requests = {
    ControllerPublishVolume: ['Controller', { volume_id: id, node_id: 'bench', volume_capability: kind.cap }],
    NodeStageVolume: ['Node', { volume_id: id, staging_target_path: p.staging, volume_capability: kind.cap }],
    NodePublishVolume: ['Node', { volume_id: id, staging_target_path: p.staging, target_path: p.target, volume_capability: kind.cap }],
    NodeGetVolumeStats: ['Node', { volume_id: id, volume_path: p.target }],
    NodeUnpublishVolume: ['Node', { volume_id: id, target_path: p.target }],
    NodeUnstageVolume: ['Node', { volume_id: id, staging_target_path: p.staging }],
    ControllerUnpublishVolume: ['Controller', { volume_id: id, node_id: 'bench' }],
    DeleteVolume: ['Controller', { volume_id: id }],
  };
  for (const method of LIFECYCLE.slice(1)) {
    const [service, req] = requests[method];
    const t = performance.now();
    await server.client.call(service, method, req);
    if (timings) (timings[method] ??= []).push(performance.now() - t);
  }
  return performance.now() - t0;
}

/**
 * `total` lifecycles (of a dir volume, or of `kind`) with `inFlight` at a time, names from `prefix`;
 * returns their wall time in ms. With `untilMs`, lifecycles start until that long has passed,
 * whatever `total` says.
 */
export async function lifecycles(srv, scratch, prefix, total, inFlight, { untilMs, kind = 'dir' } = {}) {
  let next = 0;
  const t0 = performance.now();
  const more = () => (untilMs === undefined ? next < total : performance.now() - t0 < untilMs);
  const worker = async () => {
    while (more()) await lifecycle(srv, scratch, kind, `${prefix}-${next++}`);
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return performance.now() - t0;
}

/** Progress goes to stderr, so `--json` output stays one document. */
export const progress = (msg) => process.stderr.write(`bench: ${msg}\n`);
