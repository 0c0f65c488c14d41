// The same FlexVolume rows for the single executable (dist/sea/twinvol, scripts/sea.mjs) as
// scripts/bench/flex.mjs measures for the bundle, against `node -e 0` in the same interleaved rounds:
// issue 12 wants its `init` within 1.1x of that.
import { join } from 'node:path';
import { flexRows } from './flex.mjs';
import { ROOT } from './lib.mjs';

export const SEA_BIN = join(ROOT, 'dist/sea/twinvol');

export const suite = {
  title: 'FlexVolume (single executable)',
  order: 11,
  run: (opts) => flexRows(SEA_BIN, 'sea', { rounds: opts.short ? 2 : 30 }),
};
