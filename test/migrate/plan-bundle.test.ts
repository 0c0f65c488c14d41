import { describe, expect, it } from 'vitest';
import { inputsOf } from '../helpers/bundle-inputs.js';

/**
 * `twinvol migrate plan` parses YAML; kubelet runs the same executable once per call, so neither its
 * verbs nor the rest of the CLI may load the parser (scripts/build.mjs packs flex/migrate/index.ts on
 * its own, loaded by flex/cli.ts only for `migrate plan`). And the Kubernetes schemas
 * (kubernetes-models) are for the tests: nothing of them lands in the executable.
 */

const yamlOrPlan = (p: string) => p.includes('node_modules/yaml/') || p.includes('flex/migrate/');
const schemas = (p: string) => p.includes('node_modules/kubernetes-models/') || p.includes('node_modules/@kubernetes-models/');

describe('the YAML parser stays out of kubelet\'s path and the rest of the CLI', () => {
  it.each(['flex/main.ts', 'flex/dispatch.ts', 'flex/cli.ts'])('%s bundles neither yaml nor flex/migrate/', async (entry) => {
    const inputs = await inputsOf(entry);
    expect(inputs.length).toBeGreaterThan(5);
    expect(inputs.filter(yamlOrPlan)).toEqual([]);
    expect(inputs.filter(schemas)).toEqual([]);
  });

  it('flex/migrate/index.ts bundles yaml (the check above can see it), and no Kubernetes schema', async () => {
    const inputs = await inputsOf('flex/migrate/index.ts');
    expect(inputs.some((p) => p.includes('node_modules/yaml/'))).toBe(true);
    expect(inputs.filter(schemas)).toEqual([]);
  });
});
