// Imported first by the test/sea/flex-*.test.ts files, before the FlexVolume suite each of them
// imports: it picks the single executable for that file, since test/helpers/flex-runner.ts reads
// TWINVOL_FLEX_BUILD when it loads (each test file loads its modules afresh, in import order).
import { existsSync } from 'node:fs';
import { afterAll, beforeAll } from 'vitest';

const before = process.env.TWINVOL_FLEX_BUILD;
process.env.TWINVOL_FLEX_BUILD = 'sea';

beforeAll(async () => {
  const { FLEX_BIN, FLEX_BUILD } = await import('../helpers/flex-runner.js');
  // Without this check a missing build fails every test with a bare ENOENT from spawn.
  if (FLEX_BUILD !== 'sea') throw new Error('test/sea/use-sea.ts must be imported before anything that loads test/helpers/flex-runner.ts');
  if (!existsSync(FLEX_BIN)) throw new Error(`${FLEX_BIN} is missing: npm run build makes it (unless TWINVOL_NO_SEA=1)`);
});

afterAll(() => {
  if (before === undefined) delete process.env.TWINVOL_FLEX_BUILD;
  else process.env.TWINVOL_FLEX_BUILD = before;
});
