// CSI rows: each RPC's p50 and p99, the node lifecycle of a dir and of a block volume, cold start
// to first Probe, idle and loaded RSS; all against the bare grpc-js server
// (scripts/bench/bare-grpc-server.cjs) answering the same requests with canned replies, side by side.
// The controller RPCs that change a volume are also read against that server doing their durable
// minimum (its --durable), and that server against the bare one: what the disk alone costs them.
import { coldStarts, interleaved, KINDS, launch, LIFECYCLE, lifecycle, makeScratch, median, progress, quantile, row } from './lib.mjs';

/** The RPCs the durable reference does the work of (scripts/bench/bare-grpc-server.cjs --durable). */
const DURABLE = ['CreateVolume', 'ControllerPublishVolume', 'ControllerUnpublishVolume', 'DeleteVolume'];

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
      const durable = await launch('durable', s, 'durable');
      servers.push(durable);
      for (const srv of servers) for (let i = 0; i < 20; i++) await srv.client.call('Identity', 'Probe');
      const idle = [tv.rssMb(), bare.rssMb()];
      await lifecycle(tv, s, 'dir', 'resident-warm');
      await tv.client.call('Controller', 'CreateVolume', { name: 'resident', capacity_range: { required_bytes: String(KINDS.dir.bytes) }, volume_capabilities: [KINDS.dir.cap], parameters: { backend: 'dir' } });

      const rounds = short ? 2 : 100;
      progress(`CSI per-RPC latency: ${rounds} interleaved dir lifecycles and reads`);
      const timings = [{}, {}, {}];
      const lifeDir = [[], []];
      for (let i = 0; i < rounds; i++) {
        // Each server goes first in turn: whichever runs right after another's burst pays for it.
        for (const k of [0, 1, 2].map((j) => (i + j) % 3)) {
          const srv = servers[k];
          const life = await lifecycle(srv, s, 'dir', `d-${i}`, timings[k]);
          // The durable reference is read for its controller RPCs alone.
          if (srv === durable) continue;
          lifeDir[k].push(life);
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
      const durableRef = 'bare server, durable';
      for (const method of DURABLE) {
        const [ours, canned, floor] = timings.map((t) => quantile(t[method], 0.5));
        rows.push(row(`csi.rpc.${method}.p50.durable`, `CSI ${method} p50 (dir), vs the durable minimum`, ours, 'ms', floor, durableRef));
        rows.push(row(`csi.durable.${method}.p50`, `Bare server, durable: ${method} p50`, floor, 'ms', canned, ref));
      }
      return rows;
    } finally {
      for (const srv of servers) await srv.stop();
      s.cleanup();
    }
  },
};
