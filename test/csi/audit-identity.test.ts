import { existsSync, lstatSync, readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { Client, credentials, type ServiceError } from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { type CallOutcome, outcome } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { csiFlavours, runsOn } from './helpers/flavour.js';
import { createCsiScratch, type CsiScratch } from './helpers/scratch.js';
import { runCsiOnce, serverEnv } from './helpers/server.js';
import { CONTROLLER_RPCS, GROUP_RPCS, IDENTITY_RPCS, NODE_RPCS, SPEC } from './helpers/spec.js';

/**
 * The CSI v1.12 spec's rules (csi/README.md), item by item, where the other suites leave a rule
 * untested or test it only in part: transport, identity, plugin names, and which services each mode
 * serves. Every server here is the real bundle on a scratch world; the fixture stops it and unmounts,
 * detaches and deletes everything in afterAll, whether the tests passed or not.
 */
// Against the built-in server and the exec one (test/csi/helpers/flavour.ts), every case here: they are quick.
describe.for(csiFlavours())('transport and identity ($name)', (flavour) => {
  const csi = useCsiServer({ nodeId: 'node-a', flavour });
  const { ctl, node } = csi;
  const fast = runsOn(flavour, { exec: 'fast' });

  it.runIf(fast)('answers on /csi.v1.<Service>/<Method> paths, and UNIMPLEMENTED on any other package', async () => {
    const raw = new Client(`unix://${csi.s.socketPath}`, credentials.createInsecure());
    const call = (path: string) =>
      new Promise<Buffer>((done, fail) =>
        raw.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), (err: ServiceError | null, value?: Buffer) => (err ? fail(err) : done(value!))),
      );
    try {
      expect((await call('/csi.v1.Identity/GetPluginInfo')).toString('latin1')).toContain('csi.twinvol.io');
      expect((await outcome(call('/csi.v0.Identity/GetPluginInfo'))).code).toBe('UNIMPLEMENTED');
    } finally {
      raw.close();
    }
  });

  it.runIf(fast)('creates nothing beside its socket', async () => {
    await csi.identity('Probe');
    expect(lstatSync(csi.s.socketPath).isSocket()).toBe(true);
    expect(readdirSync(dirname(csi.s.socketPath))).toEqual(['csi.sock']);
  });

  it.runIf(fast)('reports a vendor_version and a name that follow the GetPluginInfo rules', async () => {
    const info = await csi.identity('GetPluginInfo');
    expect(info.vendor_version).toMatch(/^\S+$/);
    expect(info.name.length).toBeLessThanOrEqual(63);
    expect(info.name).toMatch(/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/);
  });

  it.runIf(fast)('advertises only capability values the CSI spec defines', async () => {
    const plugin = (await csi.identity('GetPluginCapabilities')).capabilities;
    expect(plugin.length).toBeGreaterThan(0);
    for (const c of plugin) {
      if ('service' in c && c.service) expect(SPEC.pluginService).toContain(c.service.type);
      else expect(SPEC.volumeExpansion).toContain((c as { volume_expansion: { type: string } }).volume_expansion.type);
    }
    const controller = (await ctl('ControllerGetCapabilities')).capabilities.map((c) => c.rpc.type);
    const nodeCaps = (await node('NodeGetCapabilities')).capabilities.map((c) => c.rpc.type);
    expect(controller.length).toBeGreaterThan(0);
    expect(nodeCaps.length).toBeGreaterThan(0);
    for (const t of controller) expect(SPEC.controller).toContain(t);
    for (const t of nodeCaps) expect(SPEC.node).toContain(t);
    // MODIFY_VOLUME is a spec value, but ControllerModifyVolume is not implemented: not advertised.
    expect(controller).not.toContain('MODIFY_VOLUME');
    expect(new Set(controller).size).toBe(controller.length);
  });

  it.runIf(fast)('serves every RPC the spec lists: an empty request is never INTERNAL, only ControllerModifyVolume is UNIMPLEMENTED (and the group controller where there are no group snapshots)', async () => {
    const answers: Record<string, CallOutcome> = {};
    for (const m of IDENTITY_RPCS) answers[m] = await outcome(csi.identity(m));
    for (const m of CONTROLLER_RPCS) answers[m] = await outcome(ctl(m, {}));
    for (const m of NODE_RPCS) answers[m] = await outcome(node(m, {}));
    for (const m of GROUP_RPCS) answers[m] = await outcome(csi.client.call('GroupController', m, {}));
    const unimplemented = Object.entries(answers).filter(([, o]) => o.code === 'UNIMPLEMENTED').map(([m]) => m);
    expect(unimplemented).toEqual(['ControllerModifyVolume', ...(flavour.offers.includes('group-snapshots') ? [] : GROUP_RPCS)]);
    expect(Object.entries(answers).filter(([, o]) => o.code === 'INTERNAL')).toEqual([]);
    expect(Object.keys(answers)).toHaveLength(30);
  });
});

describe('plugin name rules (--driver-name)', () => {
  const scratches: CsiScratch[] = [];
  afterAll(() => {
    for (const s of scratches.splice(0)) s.cleanup();
  });
  const name63 = `csi.${'a'.repeat(56)}.io`;

  it.each([
    ['64 characters', `${name63}x`],
    ['a dot at the end', 'csi.twinvol.io.'],
    ['a dash at the start', '-csi.twinvol.io'],
    ['an underscore', 'csi_twinvol.io'],
  ])('refuses a name with %s at start-up', async (_what, name) => {
    const s = createCsiScratch('node-a');
    scratches.push(s);
    const r = await runCsiOnce(['--endpoint', `unix://${s.socketPath}`, `--driver-name=${name}`], serverEnv(s));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--driver-name must be a domain-style name');
    expect(existsSync(s.socketPath)).toBe(false);
  });

  describe('a name of exactly 63 characters', () => {
    const named = useCsiServer({ nodeId: 'node-n', args: ['--driver-name', name63] });
    it('is accepted and reported by GetPluginInfo', async () => {
      expect(name63).toHaveLength(63);
      expect((await named.identity('GetPluginInfo')).name).toBe(name63);
    });
  });
});

describe('services not served in a mode answer UNIMPLEMENTED, every one of them', () => {
  describe('--mode node', () => {
    const nodeOnly = useCsiServer({ nodeId: 'node-m', args: ['--mode', 'node'] });
    it('answers UNIMPLEMENTED to every Controller RPC and serves Identity and Node', async () => {
      for (const m of CONTROLLER_RPCS) expect(`${m}: ${(await outcome(nodeOnly.ctl(m, {}))).code}`).toBe(`${m}: UNIMPLEMENTED`);
      for (const m of GROUP_RPCS) expect(`${m}: ${(await outcome(nodeOnly.client.call('GroupController', m, {}))).code}`).toBe(`${m}: UNIMPLEMENTED`);
      expect((await nodeOnly.identity('Probe')).ready?.value).toBe(true);
      expect((await nodeOnly.node('NodeGetInfo')).node_id).toBe('node-m');
      expect((await nodeOnly.node('NodeGetCapabilities')).capabilities.length).toBeGreaterThan(0);
    });
  });
  describe('--mode controller', () => {
    const ctlOnly = useCsiServer({ nodeId: 'node-c', args: ['--mode', 'controller'] });
    it('answers UNIMPLEMENTED to every Node RPC and serves Identity and Controller', async () => {
      for (const m of NODE_RPCS) expect(`${m}: ${(await outcome(ctlOnly.node(m, {}))).code}`).toBe(`${m}: UNIMPLEMENTED`);
      const caps = await ctlOnly.identity('GetPluginCapabilities');
      expect(caps.capabilities.some((c) => 'service' in c && c.service?.type === 'CONTROLLER_SERVICE')).toBe(true);
      expect((await ctlOnly.ctl('ListVolumes', {})).entries).toEqual([]);
    });
  });
});
