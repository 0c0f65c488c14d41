// Probes a CSI server every 2 ms from a process of its own, so that each latency is the server's and
// not also the wait for a busy benchmark process's event loop (scripts/bench/csi-scale.mjs).
// Usage (forked, with an IPC channel): prober.child.mjs <socket>. It sends "ready" once the server has
// answered a first Probe, then probes until it receives "stop", and sends every latency in ms.
import { csiClient } from './lib.mjs';

const client = csiClient(process.argv[2]);
const latencies = [];
let running = true;
process.on('message', () => {
  running = false;
});
await client.call('Identity', 'Probe');
process.send('ready');
while (running) {
  const t = performance.now();
  await client.call('Identity', 'Probe');
  latencies.push(performance.now() - t);
  await new Promise((r) => setTimeout(r, 2));
}
client.close();
process.send(latencies, () => process.exit(0));
