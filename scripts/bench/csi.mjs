// CSI rows: each RPC's p50 and p99, the node lifecycle of a dir and of a block volume, cold start
// to first Probe, idle and loaded RSS; all against the bare grpc-js server
// (scripts/bench/bare-grpc-server.cjs) answering the same requests with canned replies, side by side.
import { coldStarts, interleaved, KINDS, launch, LIFECYCLE, lifecycle, makeScratch, median, progress, quantile, row } from './lib.mjs';

/** Calls that change nothing, made against a volume that stays for the whole run. */
const READS = [
  ['Identity', 'Probe', () => ({})],
  ['Identity', 'GetPluginInfo', () => ({})],
  ['Node', 'NodeGetCapabilities', () => ({})],
  ['Controller', 'ControllerGetVolume', () => ({ volume_id: 'resident' })],
  ['Controller', 'ValidateVolumeCapabilities', () => ({ volume_id: 'resident', volume_capabilities: [KINDS.dir.cap] })],
  ['Controller', 'ListVolumes', () => ({ max_entries: 100 })],
  ['Controller', 'GetCapacity', () => ({})],
];

async function timed(fn) {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

export const suite = {
  title: 'CSI',
  order: 20,
  async run({ short }) {
    const s = makeScratch('csi');
    const servers = [];
    try {
      const coldRounds = short ? 1 : 15;
      progress(`CSI cold start: ${coldRounds} interleaved starts`);
      const cold = await coldStarts(['twinvol', 'bare'], s, coldRounds);

      const tv = await launch('twinvol', s, 'twinvol');
      servers.push(tv);
      const bare = await launch('bare', s, 'bare');
      servers.push(bare);
      for (const srv of [tv, bare]) for (let i = 0; i < 20; i++) await srv.client.call('Identity', 'Probe');
      const idle = [tv.rssMb(), bare.rssMb()];
      await lifecycle(tv, s, 'dir', 'resident-warm');
      await tv.client.call('Controller', 'CreateVolume', { name: 'resident', capacity_range: { required_bytes: String(KINDS.dir.bytes) }, volume_capabilities: [KINDS.dir.cap], parameters: { backend: 'dir' } });

      const rounds = short ? 2 : 100;
      progress(`CSI per-RPC latency: ${rounds} interleaved dir lifecycles and reads`);
      const timings = [{}, {}];
      const lifeDir = [[], []];
      for (let i = 0; i < rounds; i++) {
        const order = i % 2 ? [1, 0] : [0, 1];
        for (const k of order) {
          const srv = [tv, bare][k];
          lifeDir[k].push(await lifecycle(srv, s, 'dir', `d-${i}`, timings[k]));
          for (const [service, method, req] of READS) (timings[k][method] ??= []).push(await timed(() => srv.client.call(service, method, req())));
        }
      }
      const blockRounds = short ? 1 : 15;
      progress(`CSI block lifecycle: ${blockRounds} interleaved lifecycles`);
      const lifeBlock = await interleaved(
        [tv, bare].map((srv, k) => {
          let n = 0;
          return () => lifecycle(srv, s, 'block', `b-${k}-${n++}`);
        }),
        blockRounds,
      );
      const loaded = [tv.rssMb(), bare.rssMb()];

      const ref = 'bare grpc-js server';
      const rows = [
        row('csi.cold-start', 'CSI: cold start to first Probe', median(cold[0]), 'ms', median(cold[1]), ref),
        row('csi.rss.idle', 'CSI: RSS idle', idle[0], 'MiB', idle[1], ref),
        row('csi.rss.loaded', `CSI: RSS after ${rounds + blockRounds} lifecycles`, loaded[0], 'MiB', loaded[1], ref),
        row('csi.lifecycle.dir', 'CSI: node lifecycle, dir volume (9 RPCs)', median(lifeDir[0]), 'ms', median(lifeDir[1]), ref),
        row('csi.lifecycle.block', 'CSI: node lifecycle, block volume, ext4 (9 RPCs)', median(lifeBlock[0]), 'ms', median(lifeBlock[1]), ref),
      ];
      for (const method of [...LIFECYCLE, ...READS.map((r) => r[1])]) {
        for (const [q, label] of [[0.5, 'p50'], [0.99, 'p99']])
          rows.push(row(`csi.rpc.${method}.${label}`, `CSI ${method} ${label} (dir)`, quantile(timings[0][method], q), 'ms', quantile(timings[1][method], q), ref));
      }
      return rows;
    } finally {
      for (const srv of servers) await srv.stop();
      s.cleanup();
    }
  },
};
