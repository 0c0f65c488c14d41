import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';

/**
 * The end-to-end suites (test/flex, test/csi) run the bundles in dist/. Building once per vitest run,
 * before any test file, means no run ever tests a stale bundle, however vitest was started
 * (`npm test`, `npx vitest run test/flex/...`, an editor). The build takes about a second.
 */
export default function buildBundles(): void {
  execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: resolve(import.meta.dirname, '..'), stdio: 'inherit' });
}
