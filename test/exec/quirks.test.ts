import { execFileSync } from 'node:child_process';
import { mkdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readMounts } from '../../shared/mountinfo.js';
import { DETAILS_CAP } from '../../csi/rpc.js';
import { outcome } from '../csi/helpers/client.js';
import { mountCap, stagingPath, targetPath } from '../csi/helpers/requests.js';
import { type ExecSuite, optionsOf, processGone, type TestDriver, useExecServer } from './helpers.js';
import { eventually } from '../helpers/eventually.js';

/**
 * The known quirks of real FlexVolume drivers (test/exec/drivers/tmpfs.sh, loop.sh), each through
 * the real CSI server: read with kubelet's strict rules by one server, leniently by another
 * (--flex-lenient), and what neither may do: stack a mount, outlive a deadline, wait on a daemon,
 * or log a secret.
 */
const DEADLINE_MS = 1500;
const strict = useExecServer();
// Its own server: a short deadline must not catch the other drivers' work (mkfs) on a loaded machine.
const hasty = useExecServer(() => ['--flex-timeout-ms', String(DEADLINE_MS)]);
const lenient = useExecServer(() => ['--flex-lenient', 'acme/noise', '--flex-lenient', 'acme/exit1', '--flex-lenient', 'acme/loopempty']);

const SECRET = 'hunter2-very-secret';
const SECRET_B64 = Buffer.from(SECRET).toString('base64');
const mountsAt = (path: string) => readMounts().filter((m) => m.mountPoint === path).length;

/** NodePublishVolume of a static PV of `driver` (non-attachable: no stage), with a secret. */
function publish(csi: ExecSuite, driver: TestDriver, id: string, secrets: Record<string, string> = { password: SECRET }) {
  const target = targetPath(csi.s.kubeletDir, `uid-${id}`, id);
  const call = () =>
    csi.node('NodePublishVolume', {
      volume_id: id,
      target_path: target,
      volume_capability: mountCap(),
      volume_context: { backend: 'exec', driver: `acme/${driver}`, 'csi.storage.k8s.io/pod.name': 'p', 'csi.storage.k8s.io/pod.namespace': 'ns', 'csi.storage.k8s.io/pod.uid': `uid-${id}`, 'csi.storage.k8s.io/serviceAccount.name': 'sa' },
      secrets,
    });
  return { target, call };
}

/** An attachable loop volume attached and staged, ready for NodePublishVolume. */
async function stagedLoop(csi: ExecSuite, driver: TestDriver, id: string) {
  const image = join(csi.s.root, `${id}.img`);
  writeFileSync(image, '');
  truncateSync(image, 32 * 2 ** 20);
  const ctx = { backend: 'exec', driver: `acme/${driver}`, image };
  const pub = await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: mountCap('ext4'), volume_context: ctx });
  const staging = stagingPath(csi.s.kubeletDir, id);
  await csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, publish_context: pub.publish_context, volume_capability: mountCap('ext4'), volume_context: ctx });
  const target = targetPath(csi.s.kubeletDir, `uid-${id}`, id);
  return { staging, target, publish: () => csi.node('NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: mountCap('ext4'), volume_context: ctx }) };
}

describe('exec backend: kubelet reply rules (strict)', () => {
  it('a non-attachable driver that answers Not supported to mount: FAILED_PRECONDITION, nothing mounted, as kubelet fails it', async () => {
    // kubelet's mounterDefaults would bind the device mount path, which a non-attachable driver never made.
    // twinvol flex check says "twinvol-csi refuses too" of such a driver (flex/check.ts): this is that refusal.
    const { target, call } = publish(strict, 'mountns', 'mountns-1');
    const r = await outcome(call());
    expect(r.code).toBe('FAILED_PRECONDITION');
    expect(r.message).toMatch(/did not mount .* itself, and nothing is staged on this node to bind from/);
    expect(mountsAt(target)).toBe(0);
    await strict.node('NodeUnpublishVolume', { volume_id: 'mountns-1', target_path: target });
  });

  it('a well-behaved non-attachable driver gets the pod, the secret in base64, and one unmount for two unpublishes', async () => {
    const { target, call } = publish(strict, 'tmpfs', 'tmpfs-1');
    await call();
    await call();
    expect(mountsAt(target)).toBe(1);
    await strict.node('NodeUnpublishVolume', { volume_id: 'tmpfs-1', target_path: target });
    await strict.node('NodeUnpublishVolume', { volume_id: 'tmpfs-1', target_path: target });
    expect(mountsAt(target)).toBe(0);
    const calls = strict.calls('tmpfs');
    expect(calls.map((c) => c[0])).toEqual(['init', 'mount', 'unmount']);
    expect(optionsOf(calls[1], 2)).toEqual({
      'kubernetes.io/fsType': '',
      'kubernetes.io/readwrite': 'rw',
      'kubernetes.io/pvOrVolumeName': 'tmpfs-1',
      'kubernetes.io/pod.name': 'p',
      'kubernetes.io/pod.namespace': 'ns',
      'kubernetes.io/pod.uid': 'uid-tmpfs-1',
      'kubernetes.io/serviceAccount.name': 'sa',
      'kubernetes.io/secret/password': SECRET_B64,
    });
  });

  it('a secret of 12 KiB (a certificate chain) reaches the driver whole, in its one options argument', async () => {
    const chain = `-----BEGIN CERTIFICATE-----\n${'MIIF'.repeat(3 * 1024)}\n-----END CERTIFICATE-----\n`;
    const { target, call } = publish(strict, 'tmpfs', 'tmpfs-big', { 'tls.crt': chain });
    await call();
    const mount = strict.calls('tmpfs').find((c) => c[0] === 'mount' && c[1] === target);
    expect(optionsOf(mount, 2)).toMatchObject({ 'kubernetes.io/secret/tls.crt': Buffer.from(chain).toString('base64') });
    await strict.node('NodeUnpublishVolume', { volume_id: 'tmpfs-big', target_path: target });
    expect(mountsAt(target)).toBe(0);
  });

  it('a mount that fails after mounting keeps its record: a retry answers OK, as kubelet finds the path mounted, and an unpublish takes it off', async () => {
    const { target, call } = publish(strict, 'halfway', 'halfway-1');
    expect(await outcome(call())).toEqual({ code: 'INTERNAL', message: expect.stringContaining('quota check failed after mount') });
    expect(mountsAt(target)).toBe(1);
    expect(await outcome(call())).toEqual({ code: 'OK', message: '' });
    await strict.node('NodeUnpublishVolume', { volume_id: 'halfway-1', target_path: target });
    expect(mountsAt(target)).toBe(0);
    expect(strict.calls('halfway').map((c) => c[0])).toEqual(['init', 'mount', 'unmount']);
  });

  it('a reason of 1 MiB arrives as an error with its start and end, not as silence until the deadline', async () => {
    const { target, call } = publish(strict, 'verbose', 'verbose-1');
    const failed = await outcome(call());
    expect(failed.code).toBe('INTERNAL');
    expect(failed.message).toMatch(/^FlexVolume driver acme\/verbose: mount command failed, status: Failure, reason: mount refused: x+ \.\.\. \(\d+ characters left out\) \.\.\. x+ \(end of the log\)$/);
    expect(failed.message.length).toBeLessThan(DETAILS_CAP + 64);
    expect(mountsAt(target)).toBe(0);
  });

  it('options past what the kernel takes for one argument: FAILED_PRECONDITION saying so, not as if the driver were missing', async () => {
    // 50 KiB of attributes and 60 KiB of secret (80 KiB in base64): one argument of some 130 KiB.
    const target = targetPath(strict.s.kubeletDir, 'uid-huge', 'huge-1');
    const volume_context = { backend: 'exec', driver: 'acme/tmpfs', notes: 'n'.repeat(50 * 1024) };
    const refused = await outcome(strict.node('NodePublishVolume', { volume_id: 'huge-1', target_path: target, volume_capability: mountCap(), volume_context, secrets: { key: 'k'.repeat(60 * 1024) } }));
    expect(refused.code).toBe('FAILED_PRECONDITION');
    expect(refused.message).toMatch(/E2BIG \(its arguments, the largest 1\d{5} bytes, and its environment are more than the kernel takes for one exec: 128 KiB an argument/);
    expect(mountsAt(target)).toBe(0);
    // Cutting a secret that long out of the log once built a pattern past V8's limit: the server ended.
    expect(await outcome(strict.identity('Probe', {}))).toEqual({ code: 'OK', message: '' });
    const log = (await strict.server.logWhen((e) => e.some((l) => l.volumeId === 'huge-1' && l.method === 'NodePublishVolume' && l.level !== 'info'))).text;
    expect(log).toContain('huge-1');
    expect(log).not.toContain('k'.repeat(64));
    expect(log).not.toContain(Buffer.from('k'.repeat(64)).toString('base64'));
  });

  it('stderr noise around the JSON fails as under kubelet, with the driver output in the error and the secret cut out', async () => {
    const { target, call } = publish(strict, 'noise', 'noise-1');
    const failed = await outcome(call());
    expect(failed.code).toBe('INTERNAL');
    expect(failed.message).toContain('not one JSON status object');
    expect(failed.message).toContain('OSError: [Errno 2]');
    // The driver echoed its argv (and so the secret) on stderr; none of it reaches the CO or the log.
    expect(failed.message).toContain('[redacted]');
    expect(failed.message).not.toContain(SECRET_B64);
    await strict.node('NodeUnpublishVolume', { volume_id: 'noise-1', target_path: target });
    const log = (await strict.server.logWhen((e) => e.some((l) => l.method === 'NodeUnpublishVolume'))).text;
    expect(log).toContain('noise-1');
    expect(log).not.toContain(SECRET);
    expect(log).not.toContain(SECRET_B64);
  });

  it('Success with exit code 1 is a failure (kubelet: "driver bug")', async () => {
    const { target, call } = publish(strict, 'exit1', 'exit1-1');
    const failed = await outcome(call());
    expect(failed).toEqual({ code: 'INTERNAL', message: expect.stringContaining('driver bug: exit code 1 but Success in the reply') });
    await strict.node('NodeUnpublishVolume', { volume_id: 'exit1-1', target_path: target });
  });

  it('an empty reply is a failure', async () => {
    const loop = await stagedLoop(strict, 'loopempty', 'empty-1');
    const failed = await outcome(loop.publish());
    expect(failed).toEqual({ code: 'INTERNAL', message: expect.stringContaining('unexpected end of JSON input') });
    expect(mountsAt(loop.target)).toBe(0);
    await strict.node('NodeUnpublishVolume', { volume_id: 'empty-1', target_path: loop.target });
    await strict.node('NodeUnstageVolume', { volume_id: 'empty-1', staging_target_path: loop.staging });
    await strict.ctl('ControllerUnpublishVolume', { volume_id: 'empty-1', node_id: 'node-a' });
  });

  it('a driver that stacks on a repeated mount is called once, and the target holds one mount', async () => {
    // The quirk is real: called twice by hand, the driver stacks a second tmpfs.
    const byHand = join(strict.s.kubeletDir, 'by-hand');
    mkdirSync(byHand);
    execFileSync(strict.driverPath('stack'), ['mount', byHand, '{}']);
    execFileSync(strict.driverPath('stack'), ['mount', byHand, '{}']);
    expect(mountsAt(byHand)).toBe(2);
    const { target, call } = publish(strict, 'stack', 'stack-1');
    await call();
    await call();
    await call();
    expect(mountsAt(target)).toBe(1);
    expect(strict.calls('stack').filter((c) => c[0] === 'mount' && c[1] === target)).toHaveLength(1);
    await strict.node('NodeUnpublishVolume', { volume_id: 'stack-1', target_path: target });
    expect(mountsAt(target)).toBe(0);
  });

  it('a call past its deadline fails, and its whole process group is gone', async () => {
    const { target, call } = publish(hasty, 'hang', 'hang-1');
    const failed = await outcome(call());
    expect(failed).toEqual({ code: 'INTERNAL', message: expect.stringContaining(`mount did not answer within ${DEADLINE_MS} ms (killed)`) });
    const pids = hasty.pids('hang');
    // The driver itself and the child it waited on.
    expect(pids).toHaveLength(2);
    expect(await eventually(() => pids.every(processGone))).toBe(true);
    await hasty.node('NodeUnpublishVolume', { volume_id: 'hang-1', target_path: target });
  });

  it('a daemon left holding the driver\'s output does not hold the reply', async () => {
    const { target, call } = publish(strict, 'daemon', 'daemon-1');
    await call();
    const [daemon] = strict.pids('daemon');
    // Still running after the reply came: the reply did not wait for it (it sleeps 300 s).
    expect(daemon !== undefined && !processGone(daemon)).toBe(true);
    expect(mountsAt(target)).toBe(1);
    await strict.node('NodeUnpublishVolume', { volume_id: 'daemon-1', target_path: target });
  });
});

describe('exec backend: --flex-lenient drivers', () => {
  it('noise around the JSON: the last JSON object is the reply, the rest is logged without the secret', async () => {
    const { target, call } = publish(lenient, 'noise', 'noise-2');
    await call();
    expect(mountsAt(target)).toBe(1);
    const { entries, text } = await lenient.server.logWhen((e) => e.some((l) => l.msg === 'FlexVolume driver reply read leniently'));
    expect(text).toContain('debug: called with mount');
    expect(text).toContain('Traceback');
    expect(entries.length).toBeGreaterThan(0);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(SECRET_B64);
    await lenient.node('NodeUnpublishVolume', { volume_id: 'noise-2', target_path: target });
  });

  it('Success with exit code 1 is taken as Success', async () => {
    const { target, call } = publish(lenient, 'exit1', 'exit1-2');
    await call();
    expect(mountsAt(target)).toBe(1);
    await lenient.node('NodeUnpublishVolume', { volume_id: 'exit1-2', target_path: target });
    expect(mountsAt(target)).toBe(0);
  });

  it('an empty reply is Not supported: the staged filesystem is bind-mounted, as kubelet falls back', async () => {
    const loop = await stagedLoop(lenient, 'loopempty', 'empty-2');
    await loop.publish();
    expect(mountsAt(loop.target)).toBe(1);
    writeFileSync(join(loop.target, 'x'), 'y');
    await lenient.node('NodeUnpublishVolume', { volume_id: 'empty-2', target_path: loop.target });
    await lenient.node('NodeUnstageVolume', { volume_id: 'empty-2', staging_target_path: loop.staging });
    await lenient.ctl('ControllerUnpublishVolume', { volume_id: 'empty-2', node_id: 'node-a' });
    expect(mountsAt(loop.staging)).toBe(0);
  });
});
