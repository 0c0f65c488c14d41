// The floor for the CSI server: a bare grpc-js server that loads the same csi.proto with the same
// loader options and answers every RPC of every service with a canned reply (Probe: ready), doing
// nothing else. Cold start, RSS and per-RPC latency of twinvol-csi are read as ratios to this.
// Usage: node bare-grpc-server.cjs <socket>
const grpc = require('@grpc/grpc-js');
const { loadSync } = require('@grpc/proto-loader');
const { resolve } = require('node:path');

const socket = process.argv[2];
const definition = loadSync(resolve(__dirname, '../../csi/proto/csi.proto'), { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const CANNED = {
  Probe: { ready: { value: true } },
  CreateVolume: { volume: { volume_id: 'canned', capacity_bytes: '1048576', volume_context: { backend: 'dir' } } },
  NodeGetVolumeStats: { usage: [{ unit: 'BYTES', total: '1', used: '1', available: '1' }], volume_condition: { abnormal: false, message: 'volume is healthy' } },
};
const server = new grpc.Server();
for (const service of ['Identity', 'Controller', 'Node', 'GroupController']) {
  const def = definition[`csi.v1.${service}`];
  const handlers = Object.fromEntries(Object.keys(def).map((method) => [method, (_call, cb) => cb(null, CANNED[method] ?? {})]));
  server.addService(def, handlers);
}
server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) throw err;
});
process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
