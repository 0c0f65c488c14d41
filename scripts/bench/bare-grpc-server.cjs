// The floor for the CSI server's cold start: a bare grpc-js server that loads the same csi.proto with
// the same loader options and answers Probe, nothing else. Usage: node bare-grpc-server.cjs <socket>
const grpc = require('@grpc/grpc-js');
const { loadSync } = require('@grpc/proto-loader');
const { resolve } = require('node:path');

const socket = process.argv[2];
const definition = loadSync(resolve(__dirname, '../../csi/proto/csi.proto'), { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const server = new grpc.Server();
server.addService(definition['csi.v1.Identity'], { Probe: (_call, cb) => cb(null, { ready: { value: true } }) });
server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) throw err;
});
process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
