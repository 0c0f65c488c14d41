import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { flexGlobalMountPath } from '../../shared/index.js';
import { mountCap } from '../csi/helpers/requests.js';
import { launchCsi } from '../csi/helpers/server.js';
import { installDrivers, VENDOR } from '../exec/helpers.js';
import { goJson } from '../helpers/go-json.js';
import { runAdmin } from '../helpers/flex-runner.js';
import { leftovers, parseReport, useVerifyWorld, verify, writeRichTree } from './verify-world.js';

/** test/exec/drivers/loop.sh, installed as acme~loop. */
const LOOP_DRIVER = { vendor: VENDOR, name: 'loop' };

/**
 * `twinvol migrate verify` on an exec volume: a third-party FlexVolume driver (test/exec/drivers/loop.sh,
 * attachable: a loop device over an image file, formatted and mounted by mountdevice) that kubelet ran
 * before the move and twinvol-csi's exec backend runs after it. The data the driver's volume got under
 * FlexVolume reads the same through CSI and back; a volume the driver has mounted for kubelet is refused.
 */
const world = useVerifyWorld();
const pluginDir = () => join(world().root, 'plugins');

afterEach(async () => {
  expect(await leftovers(world())).toEqual([]);
});

/** The driver run as kubelet would, by hand: `loop <verb> args...`, which must answer Success. */
function driver(...args: string[]): Record<string, unknown> {
  const out = execFileSync(join(pluginDir(), 'acme~loop', 'loop'), args, { encoding: 'utf8' });
  const reply = JSON.parse(out) as Record<string, unknown>;
  expect(reply.status, out).toBe('Success');
  return reply;
}

let made: { image: string; pvFile: string } | undefined;

/** The image the loop driver serves, written under FlexVolume once: attach, mountdevice (formats), write, unmountdevice, detach. */
function imageWithData(name: string, pv: string): { image: string; pvFile: string } {
  if (made) return made;
  const s = world();
  installDrivers(pluginDir());
  const image = join(s.root, `${name}.img`);
  execFileSync('truncate', ['-s', '32M', image]);
  const opts = goJson({ image, 'kubernetes.io/fsType': 'ext4', 'kubernetes.io/pvOrVolumeName': pv, 'kubernetes.io/readwrite': 'rw' });
  const device = String(driver('attach', opts, 'node-a').device);
  const global = flexGlobalMountPath(s.kubeletDir, LOOP_DRIVER, pv);
  mkdirSync(global, { recursive: true });
  driver('mountdevice', global, device, opts);
  try {
    writeRichTree(global, name);
  } finally {
    driver('unmountdevice', global);
    driver('detach', pv, 'node-a');
  }
  const pvFile = join(s.root, `${pv}.yaml`);
  writeFileSync(
    pvFile,
    [
      'apiVersion: v1',
      'kind: PersistentVolume',
      `metadata: {name: ${pv}}`,
      'spec:',
      '  capacity: {storage: 32Mi}',
      '  accessModes: [ReadWriteOnce]',
      '  flexVolume:',
      '    driver: acme/loop',
      '    fsType: ext4',
      `    options: {image: ${JSON.stringify(image)}}`,
      '',
    ].join('\n'),
  );
  made = { image, pvFile };
  return made;
}

describe('migrate verify: an exec volume of a third-party FlexVolume driver', () => {
  it('what the driver held under FlexVolume reads the same through twinvol-csi exec backend and back', { timeout: 300_000 }, async () => {
    const s = world();
    const { pvFile } = imageWithData('ex-1', 'pv-ex-1');
    const report = parseReport(await verify(s, ['ex-1', '--pv', pvFile, '--plugin-dir', pluginDir(), '--json']));
    expect(report.verdict, report.error).toBe('match');
    // The rich tree (9 entries with the root, 1 MiB and a line) plus lost+found from mkfs.ext4.
    expect(report.sums.flex?.tree.entries).toBe(10);
    expect(report.sums.flex?.tree.bytes).toBe(2 ** 20 + 'tag=ex-1\n'.length);
    expect(report.sums.csi?.tree.digest).toBe(report.sums.flex?.tree.digest);
    expect(report.sums.rollback?.tree.digest).toBe(report.sums.flex?.tree.digest);
    // The driver itself served both halves: attach under FlexVolume and behind the CSI server.
    expect(report.steps.filter((st) => st.model === 'flex' && st.call === 'attach')).toHaveLength(2);
    expect(report.steps.some((st) => st.call === 'NodeStageVolume' && st.outcome === 'OK')).toBe(true);
    // The registration the static PV's first CSI call made is gone again.
    expect((await runAdmin(s.env, ['volume', 'inspect', 'ex-1'])).exitCode).toBe(1);
  });

  it('an exec volume the CSI server already knows: the catalog names its driver (no --pv), and it stays registered', { timeout: 300_000 }, async () => {
    const s = world();
    const { image } = imageWithData('ex-1', 'pv-ex-1');
    const csi = await launchCsi(s, { args: ['--flex-plugin-dir', pluginDir()] });
    try {
      await csi.client.call('Controller', 'CreateVolume', { name: 'ex-cat', parameters: { backend: 'exec', driver: 'acme/loop', fsType: 'ext4', image }, volume_capabilities: [mountCap('ext4')] });
      const report = parseReport(await verify(s, ['ex-cat', '--plugin-dir', pluginDir(), '--csi-endpoint', `unix://${s.socketPath}`, '--json']));
      expect(report.verdict, report.error).toBe('match');
      expect(report.sums.flex?.tree.bytes).toBe(2 ** 20 + 'tag=ex-1\n'.length);
      expect((await runAdmin(s.env, ['volume', 'inspect', 'ex-cat'])).exitCode).toBe(0);
      await csi.client.call('Controller', 'DeleteVolume', { volume_id: 'ex-cat' });
    } finally {
      await csi.stop();
    }
  });

  it('refuses the volume while the driver has it mounted for kubelet, and touches nothing', { timeout: 300_000 }, async () => {
    const s = world();
    const { image, pvFile } = imageWithData('ex-1', 'pv-ex-1');
    const opts = goJson({ image, 'kubernetes.io/fsType': 'ext4', 'kubernetes.io/pvOrVolumeName': 'pv-ex-1', 'kubernetes.io/readwrite': 'rw' });
    const device = String(driver('attach', opts, 'node-a').device);
    const global = flexGlobalMountPath(s.kubeletDir, LOOP_DRIVER, 'pv-ex-1');
    driver('mountdevice', global, device, opts);
    try {
      const r = await verify(s, ['ex-1', '--pv', pvFile, '--plugin-dir', pluginDir()]);
      expect(r.exitCode).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain(`refused: volume ex-1 is mounted on this node at ${global}`);
      expect((await leftovers(s)).filter((l) => !l.includes(global) && !l.startsWith('loop'))).toEqual([]);
    } finally {
      driver('unmountdevice', global);
      driver('detach', 'pv-ex-1', 'node-a');
    }
  });

  it('a password written inline in the PV\'s options, which the driver echoes in its refusal, is cut from the report', { timeout: 300_000 }, async () => {
    const s = world();
    const password = 'inline-9d41-MUST-NOT-LEAK';
    // A driver whose mount quotes its options (kubelet's JSON, the PV's password in it) when it refuses.
    const dir = join(pluginDir(), `${VENDOR}~echoer`);
    mkdirSync(dir, { recursive: true });
    const script = `#!/bin/bash\ncase "$1" in\ninit) echo '{"status":"Success","capabilities":{"attach":false}}' ;;\nmount) jq -cn --arg m "login refused; options $3" '{status: "Failure", message: $m}'; exit 1 ;;\n*) echo '{"status":"Not supported"}'; exit 1 ;;\nesac\n`;
    writeFileSync(join(dir, 'echoer'), script);
    chmodSync(join(dir, 'echoer'), 0o755);
    const pvFile = join(s.root, 'pv-echoer.yaml');
    writeFileSync(pvFile, ['apiVersion: v1', 'kind: PersistentVolume', 'metadata: {name: pv-echoer}', 'spec:', '  capacity: {storage: 32Mi}', '  accessModes: [ReadWriteOnce]', '  flexVolume:', '    driver: acme/echoer', `    options: {server: x, password: ${password}}`, ''].join('\n'));
    const r = await verify(s, ['pv-echoer', '--pv', pvFile, '--plugin-dir', pluginDir(), '--json']);
    const report = parseReport(r);
    expect(report.verdict).toBe('failed');
    expect(report.error).toContain('login refused; options {');
    expect(report.error).toContain('"password":"[redacted]"');
    expect(r.stdout).not.toContain(password);
  });
});
