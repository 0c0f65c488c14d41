// The end goal of the performance work, measured: twinvol-csi against the Go reference driver of
// kubernetes-csi (csi-driver-host-path's hostpathplugin, whose volumes are directories), side by
// side in one run. Rows: the node lifecycle of a dir volume against the Go driver's (the goal: no
// slower), of a block volume with ext4 on a loop device against the same (the goal: within 1.5x),
// each lifecycle RPC's p50, cold start to the first Probe, and 16 lifecycles in flight.
// The Go driver is not part of twinvol: TWINVOL_BENCH_HOSTPATH names a built hostpathplugin (README,
// "Benchmarks", says how to build one); without it this suite says so and adds no rows.
import { existsSync } from 'node:fs';
import { coldStarts, HOSTPATH_BIN, interleaved, launch, LIFECYCLE, lifecycle, lifecycles, makeScratch, median, progress, row } from './lib.mjs';

const REF = 'Go reference driver (hostpath)';

export const suite = {
  title: 'CSI reference driver',
  order: 25,
  async run({ short }) {
    if (!HOSTPATH_BIN) {
      progress('CSI reference driver: skipped; set TWINVOL_BENCH_HOSTPATH to a built hostpathplugin (README, "Benchmarks")');
      return [];
    }
    if (!existsSync(HOSTPATH_BIN)) throw new Error(`TWINVOL_BENCH_HOSTPATH names ${HOSTPATH_BIN}, which does not exist`);
    const s = makeScratch('ref');
    const servers = [];
    try {
      const coldRounds = short ? 1 : 15;
      progress(`CSI reference driver: cold start, ${coldRounds} interleaved starts`);
      const cold = await coldStarts(['twinvol', 'hostpath'], s, coldRounds);

      const tv = await launch('twinvol', s, 'twinvol');
      servers.push(tv);
      const hp = await launch('hostpath', s, 'hostpath');
      servers.push(hp);
      const contenders = [
        [tv, 'dir'],
        [hp, 'hostpath'],
      ];

      const rounds = short ? 2 : 100;
      progress(`CSI reference driver: ${rounds} interleaved dir lifecycles`);
      const timings = [{}, {}];
      const dir = await interleaved(
        contenders.map(([srv, kind], k) => {
          let n = 0;
          // interleaved's first call warms up: its RPCs are not timed.
          return () => lifecycle(srv, s, kind, `d-${n}`, n++ === 0 ? undefined : timings[k]);
        }),
        rounds,
      );

      const blockRounds = short ? 1 : 15;
      progress(`CSI reference driver: ${blockRounds} interleaved block lifecycles against the Go driver's dir lifecycle`);
      const block = await interleaved(
        [
          [tv, 'block'],
          [hp, 'hostpath'],
        ].map(([srv, kind], k) => {
          let n = 0;
          return () => lifecycle(srv, s, kind, `b-${k}-${n++}`);
        }),
        blockRounds,
      );

      // Two passes each, in the order A B B A, so that a slow minute of the machine hits both alike.
      const total = short ? 16 : 100;
      progress(`CSI reference driver: ${total} dir lifecycles 16 in flight, twice each`);
      const wall = [0, 0];
      for (const k of [0, 1, 1, 0]) {
        const [srv, kind] = contenders[k];
        wall[k] += await lifecycles(srv, s, `par-${k}-${wall[k] > 0 ? 1 : 0}`, total, 16, { kind });
      }
      const throughput = wall.map((ms) => (2 * total * 1000) / ms);

      const rows = [
        row('reference.cold-start', 'CSI vs Go: cold start to first Probe', median(cold[0]), 'ms', median(cold[1]), REF),
        row('reference.lifecycle.dir', 'CSI vs Go: node lifecycle, dir volume (9 RPCs)', median(dir[0]), 'ms', median(dir[1]), REF),
        row('reference.lifecycle.block', 'CSI vs Go: node lifecycle, block ext4 vs Go dir', median(block[0]), 'ms', median(block[1]), REF),
        row('reference.throughput.16', `CSI vs Go: ${total} dir lifecycles 16 in flight`, throughput[0], 'lifecycles/s', throughput[1], REF),
      ];
      for (const method of LIFECYCLE) rows.push(row(`reference.rpc.${method}.p50`, `CSI vs Go: ${method} p50 (dir)`, median(timings[0][method]), 'ms', median(timings[1][method]), REF));
      return rows;
    } finally {
      for (const srv of servers) await srv.stop();
      s.cleanup();
    }
  },
};
