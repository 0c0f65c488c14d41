// Memory over a long run: the CSI server's RSS after N dir lifecycles against after 10 x N, 16 in
// flight. A long-running server must not grow with the work it has done (issue 12: flat within 5%
// from 1,000 to 10,000 lifecycles). That scale takes minutes, so it runs with --long; the default
// run takes 200 and 2,000, --short 10 and 100 (CI checks only that the row is there).
import { launch, lifecycles, makeScratch, median, progress, row } from './lib.mjs';

/** RSS once the server is idle: the median of 20 samples 50 ms apart (a collection may run meanwhile). */
async function settledRss(srv) {
  const samples = [];
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 50));
    samples.push(srv.rssMb());
  }
  return median(samples);
}

export const suite = {
  title: 'CSI memory',
  order: 40,
  async run({ short, long }) {
    const first = short ? 10 : long ? 1_000 : 200;
    const s = makeScratch('rss');
    let srv;
    try {
      srv = await launch('twinvol', s, 'rss');
      progress(`${first} dir lifecycles, then ${9 * first} more, 16 in flight`);
      await lifecycles(srv, s, 'a', first, 16);
      const before = await settledRss(srv);
      await lifecycles(srv, s, 'b', 9 * first, 16);
      const after = await settledRss(srv);
      return [row('csi.rss.growth', `CSI: RSS after ${10 * first} lifecycles vs after ${first}`, after, 'MiB', before, `after ${first}`)];
    } finally {
      await srv?.stop();
      s.cleanup();
    }
  },
};
