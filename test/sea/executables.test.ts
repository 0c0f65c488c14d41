// The single executables (dist/sea, made by scripts/sea.mjs) where there is no Node: ELF binaries,
// run under `env -i` (no PATH, no HOME, nothing), and the CSI server through a block volume's life.
// Whatever the executables still assumed of Node (a shebang, re-spawning process.execPath, a file
// read beside __filename, a require of a non-builtin, an ExperimentalWarning on stderr) fails here.
// The FlexVolume suites run against the single executable too: test/sea/flex-*.test.ts.
import { spawnSync } from 'node:child_process';
import { chmodSync, closeSync, copyFileSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { type Collected, collect } from '../helpers/collect.js';
import { useCsiServer } from '../csi/helpers/fixture.js';
import { mountInPod } from '../csi/helpers/pod-mount.js';
import { MiB, mountCap, size } from '../csi/helpers/requests.js';
import { FLEX_BUILDS, flexOptions } from '../helpers/flex-runner.js';
import { createScratch, loopsLeftUnder, mountsUnder, type Scratch } from '../helpers/scratch.js';

const FLEX_SEA = FLEX_BUILDS.sea;
const CSI_SEA = resolve(import.meta.dirname, '../../dist/sea/twinvol-csi');

/** `env -i [VAR=value...] bin args...` from cwd /: the executable gets exactly `vars`, nothing else. */
function envI(bin: string, args: readonly string[], vars: Record<string, string> = {}): Promise<Collected> {
  const assigned = Object.entries(vars).map(([k, v]) => `${k}=${v}`);
  return collect('/usr/bin/env', ['-i', ...assigned, bin, ...args], { cwd: '/' });
}

describe('the single executables under an empty environment', () => {
  let s: Scratch;
  beforeEach(() => {
    s = createScratch('node-a');
  });
  afterEach(() => s.cleanup());

  it('are Node single executables, not scripts for a node found on the PATH', () => {
    for (const bin of [FLEX_SEA, CSI_SEA]) {
      expect(existsSync(bin), `${bin}: npm run build makes it (unless TWINVOL_NO_SEA=1)`).toBe(true);
      // An ELF binary with the fuse postject flips (grep: reading 100 MB into the test costs seconds), not a "#!" script.
      const fd = openSync(bin, 'r');
      const head = Buffer.alloc(4);
      readSync(fd, head, 0, 4, 0);
      closeSync(fd);
      expect(head.toString('latin1'), bin).toBe('\x7fELF');
      expect(spawnSync('grep', ['-c', '-a', '-F', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2:1', bin], { encoding: 'utf8' }).stdout.trim(), bin).toBe('1');
    }
  });

  it('twinvol answers init, --version and an unknown verb with nothing on stderr (no ExperimentalWarning)', async () => {
    const init = await envI(FLEX_SEA, ['init']);
    expect(init).toEqual({ code: 0, stdout: expect.any(String), stderr: '' });
    const reply = JSON.parse(init.stdout) as { status: string };
    if (!existsSync('/etc/twinvol/config.json')) expect(reply).toEqual({ status: 'Success', capabilities: { fsGroup: false } });
    else expect(reply.status).toBe('Success');
    // --version loads the packed CLI (flex/packed-modules.ts), which the single executable must find inside itself.
    expect(await envI(FLEX_SEA, ['--version'])).toEqual({ code: 0, stdout: `twinvol ${pkg.version}\n`, stderr: '' });
    expect(await envI(FLEX_SEA, ['frobnicate', '{}'])).toEqual({ code: 0, stdout: '{"status":"Not supported"}', stderr: '' });
  });

  it('twinvol answers kubelet verbs with a JSON reply, its settings from TWINVOL_CONFIG alone', async () => {
    const config = join(s.root, 'sea-config.json');
    writeFileSync(config, JSON.stringify({ dataRoot: s.dataRoot, stateDir: s.stateDir, kubeletDir: s.kubeletDir, nodeName: 'node-a' }));
    const vars = { TWINVOL_CONFIG: config };
    // Made by the single executable's own CLI (the packed yargs module), under the same empty environment.
    const created = await envI(FLEX_SEA, ['volume', 'create', 'vol-sea', '--backend', 'dir', '--size', '1Mi'], vars);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const opts = flexOptions('pv-sea', { volumeId: 'vol-sea' });
    expect(await envI(FLEX_SEA, ['getvolumename', opts], vars)).toEqual({ code: 0, stdout: '{"status":"Success","volumeName":"vol-sea"}', stderr: '' });
    expect(await envI(FLEX_SEA, ['isattached', opts, 'node-a'], vars)).toEqual({ code: 0, stdout: '{"status":"Success","attached":false}', stderr: '' });
    const missing = await envI(FLEX_SEA, ['getvolumename', flexOptions('pv-none', { volumeId: 'vol-none' })], vars);
    expect(missing.stderr).toBe('');
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toEqual({ status: 'Failure', message: expect.stringContaining('vol-none') });
  });

  it('install flex, run from the single executable, copies the single executable, which runs alone from there', async () => {
    // A private copy, run from where no bundle is: another test run may rebuild dist/ meanwhile.
    const own = join(s.root, 'downloaded', 'twinvol');
    mkdirSync(dirname(own), { recursive: true });
    copyFileSync(FLEX_SEA, own);
    chmodSync(own, 0o755);
    // A bundle's file left where the single executable now is: the single executable reads none, and brings none.
    copyFileSync(`${FLEX_BUILDS.bundle}.modules`, `${own}.modules`);
    const pluginDir = join(s.root, 'volume-plugins');
    // The bundle installed there first: its file of modules goes once the single executable, which
    // carries its own, replaces it (flex/install.ts).
    const bundle = await collect(FLEX_BUILDS.bundle, ['install', 'flex', '--plugin-dir', pluginDir, '--vendor', 'acme'], { env: { PATH: '/usr/bin:/bin', ...s.env } });
    expect(bundle.code, bundle.stderr).toBe(0);
    expect(readdirSync(join(pluginDir, 'acme~twinvol'))).toEqual(['twinvol', 'twinvol-mount.node', 'twinvol.modules']);
    const r = await envI(own, ['install', 'flex', '--plugin-dir', pluginDir, '--vendor', 'acme']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const installed = join(pluginDir, 'acme~twinvol', 'twinvol');
    // The copy has no mount addon beside it either: it brings none, and the bundle's goes (mount(8) then).
    expect(readdirSync(join(pluginDir, 'acme~twinvol'))).toEqual(['twinvol']);
    expect(spawnSync('cmp', ['-s', own, installed]).status, 'the installed file is the single executable, byte for byte').toBe(0);
    expect(await envI(installed, ['--version'])).toEqual({ code: 0, stdout: `twinvol ${pkg.version}\n`, stderr: '' });
  });

  it('twinvol-csi answers --version', async () => {
    expect(await envI(CSI_SEA, ['--version'])).toEqual({ code: 0, stdout: `twinvol-csi ${pkg.version}\n`, stderr: '' });
  });
});

describe('the single executable CSI server', () => {
  const csi = useCsiServer({ command: [CSI_SEA] });

  it('serves Probe and GetPluginInfo, and its log holds no warning', async () => {
    expect(await csi.identity('Probe')).toMatchObject({ ready: { value: true } });
    expect(await csi.identity('GetPluginInfo')).toMatchObject({ vendor_version: pkg.version });
    // stderr is the JSON log: every line parses, and none is Node's ExperimentalWarning.
    const lines = csi.server.logLines();
    expect(lines.join('\n')).not.toMatch(/ExperimentalWarning|single-executable/i);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
  });

  it('runs a block volume through stage and publish: the tools it spawns, nothing of its own re-spawned', async () => {
    const id = 'sea-block';
    const cap = mountCap('ext4');
    await csi.ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: csi.flavour.parameters('block', 16 * MiB), capacity_range: size(16 * MiB) });
    const pod = await mountInPod(csi, id, cap);
    writeFileSync(join(pod.target, 'hello.txt'), 'from a pod');
    expect(readFileSync(join(pod.target, 'hello.txt'), 'utf8')).toBe('from a pod');
    await pod.release();
    await csi.ctl('DeleteVolume', { volume_id: id });
    expect(mountsUnder(csi.s.root)).toEqual([]);
    expect(await loopsLeftUnder(csi.s.root)).toEqual([]);
  });
});
