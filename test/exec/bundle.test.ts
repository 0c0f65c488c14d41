import { describe, expect, it } from 'vitest';
import { inputsOf } from '../helpers/bundle-inputs.js';

/**
 * execa runs third-party drivers for the CSI server only: nothing the FlexVolume executable loads may
 * hold it (issue 9: kubelet runs that executable once per call, so its start-up must stay lean). The
 * executable's entry and the two modules packed inside it (scripts/build.mjs) are bundled as the
 * build does, and their inputs listed.
 */

describe('execa stays out of the FlexVolume executable', () => {
  it.each(['flex/main.ts', 'flex/dispatch.ts', 'flex/cli.ts'])('%s does not bundle execa or the driver runner', async (entry) => {
    const inputs = await inputsOf(entry);
    expect(inputs.length).toBeGreaterThan(5);
    expect(inputs.filter((p) => p.includes('node_modules/execa/') || p.endsWith('shared/backends/exec-run.ts'))).toEqual([]);
  });

  it.each(['csi/service-thread-worker.ts', 'flex/check.ts'])('%s does bundle it (the check above can see execa)', async (entry) => {
    // csi/service-thread-worker.ts is the CSI server's service thread, which runs the core and its
    // drivers, bundled on its own (scripts/build.mjs). flex/check.ts (`twinvol flex check`) is packed on its own (scripts/build.mjs) and loaded by
    // flex/cli.ts only for that command: the cli check above proves it is not pulled in with the CLI.
    const inputs = await inputsOf(entry);
    expect(inputs.some((p) => p.includes('node_modules/execa/'))).toBe(true);
  });
});

/**
 * The CSI server's logs and metrics (csi/logging.ts, csi/metrics.ts) stay out of the FlexVolume
 * executable as well: pino and its synchronous writer, and prom-client, are the CSI server's alone.
 */
const OBSERVABILITY = ['pino', 'sonic-boom', 'thread-stream', 'prom-client'];
const fromPackage = (inputs: string[], name: string) => inputs.some((p) => p.includes(`node_modules/${name}/`));

describe('pino and prom-client stay out of the FlexVolume executable', () => {
  it.each(['flex/main.ts', 'flex/dispatch.ts', 'flex/cli.ts', 'flex/check.ts'])('%s bundles none of them', async (entry) => {
    const inputs = await inputsOf(entry);
    expect(inputs.length).toBeGreaterThan(5);
    expect(OBSERVABILITY.filter((name) => fromPackage(inputs, name))).toEqual([]);
    expect(inputs.filter((p) => /csi\/(logging|metrics)/.test(p))).toEqual([]);
  });

  it('the CSI service thread bundles pino and prom-client (the check above can see them)', async () => {
    const inputs = await inputsOf('csi/service-thread-worker.ts');
    expect(OBSERVABILITY.filter((name) => name !== 'thread-stream' && !fromPackage(inputs, name))).toEqual([]);
  });
});
