// The floor for the CSI server: a bare grpc-js server that loads the same csi.proto with the same
// loader options and answers every RPC of every service with a canned reply (Probe: ready), doing
// nothing else. Cold start, RSS and per-RPC latency of twinvol-csi are read as ratios to this.
//
// With `--durable <dir>` the four controller RPCs that change a volume also do, synchronously and on
// the one thread, the least work that keeps what twinvol promises for them (README "Benchmarks"): a
// lock another process would respect (a directory made and removed, as proper-lockfile's is), the
// volume's record read, and the new record written whole and durably (a temporary file, fsync,
// rename); CreateVolume also makes the volume's directory, and CreateVolume and DeleteVolume fsync
// the directory that lists the volumes, so a volume the answer reported survives a power cut. No
// validation, no logs, no metrics: what the disk alone costs a call that keeps those guarantees,
// which twinvol's controller RPCs are also read against (scripts/bench/csi.mjs).
// Usage: node bare-grpc-server.cjs <socket> [--durable <dir>]
const grpc = require('@grpc/grpc-js');
const { loadSync } = require('@grpc/proto-loader');
const fs = require('node:fs');
const { join, resolve } = require('node:path');

const [socket, flag, durableDir] = process.argv.slice(2);
const definition = loadSync(resolve(__dirname, '../../csi/proto/csi.proto'), { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const CANNED = {
  Probe: { ready: { value: true } },
  CreateVolume: { volume: { volume_id: 'canned', capacity_bytes: '1048576', volume_context: { backend: 'dir' } } },
  NodeGetVolumeStats: { usage: [{ unit: 'BYTES', total: '1', used: '1', available: '1' }], volume_condition: { abnormal: false, message: 'volume is healthy' } },
};

function fsyncPath(path) {
  const fd = fs.openSync(path, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** The durable minimum (see the top): `change` maps the record read (or undefined) to the one to keep, or null to delete. */
function durably(root, id, change) {
  const lock = join(root, 'locks', `${id}.lock`);
  fs.mkdirSync(lock);
  try {
    const dir = join(root, 'volumes', id);
    const file = join(dir, 'volume.json');
    let record;
    try {
      record = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch {
      record = undefined;
    }
    const next = change(record);
    if (next === null) {
      fs.rmSync(dir, { recursive: true, force: true });
      fsyncPath(join(root, 'volumes'));
      return;
    }
    const made = !record;
    if (made) fs.mkdirSync(join(dir, 'data'), { recursive: true });
    const temporary = `${file}.${process.pid}.tmp`;
    const fd = fs.openSync(temporary, 'w', 0o600);
    try {
      fs.writeSync(fd, JSON.stringify(next));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temporary, file);
    if (made) fsyncPath(join(root, 'volumes'));
  } finally {
    fs.rmdirSync(lock);
  }
}

function durableHandlers(root) {
  for (const d of ['locks', 'volumes']) fs.mkdirSync(join(root, d), { recursive: true });
  const attachments = (node) => (record) => ({ ...record, attachments: node ? [node] : [] });
  return {
    CreateVolume: (req) => {
      durably(root, req.name, (record) => record ?? { id: req.name, capacity: '1048576', attachments: [] });
      return { volume: { ...CANNED.CreateVolume.volume, volume_id: req.name } };
    },
    ControllerPublishVolume: (req) => (durably(root, req.volume_id, attachments(req.node_id)), {}),
    ControllerUnpublishVolume: (req) => (durably(root, req.volume_id, attachments(undefined)), {}),
    DeleteVolume: (req) => (durably(root, req.volume_id, () => null), {}),
  };
}

if (flag !== undefined && (flag !== '--durable' || !durableDir)) throw new Error('usage: bare-grpc-server.cjs <socket> [--durable <dir>]');
const work = durableDir ? durableHandlers(durableDir) : {};
const server = new grpc.Server();
for (const service of ['Identity', 'Controller', 'Node', 'GroupController']) {
  const def = definition[`csi.v1.${service}`];
  const handlers = Object.fromEntries(
    Object.keys(def).map((method) => [
      method,
      (call, cb) => {
        let reply;
        try {
          reply = work[method] ? work[method](call.request) : (CANNED[method] ?? {});
        } catch (err) {
          // Said to the benchmark, which stops on it, rather than a crash it would read as a hang.
          return cb({ code: grpc.status.INTERNAL, details: err instanceof Error ? err.message : String(err) });
        }
        cb(null, reply);
      },
    ]),
  );
  server.addService(def, handlers);
}
server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) throw err;
});
process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
