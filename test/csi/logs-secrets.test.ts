import { mkdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { useExecServer } from '../exec/helpers.js';
import { wrappedTool } from '../helpers/tool-wrapper.js';
import { outcome } from './helpers/client.js';
import { metricsPort, scrape } from './metrics-scrape.js';
import { MiB, mountCap, size, stagingPath, targetPath } from './helpers/requests.js';

/**
 * No secret reaches the CSI server's log, even at trace, where every request is logged whole: a
 * secret is sent on every RPC that takes one (every `secrets` field of csi.proto the server serves),
 * through the exec backend to a FlexVolume driver that prints its argv (the secret in base64) on
 * stderr, and, pasted in the wrong field, into an error message; nor its metrics.
 * test/csi/audit-requests.test.ts checks the same at the default level.
 */
const csi = useExecServer(() => ['--log-level', 'trace', '--flex-lenient', 'acme/noise', '--metrics-address', '127.0.0.1:0'], (s) => ({ PATH: `${echoingMount(s.root)}:${process.env.PATH ?? '/usr/bin:/bin'}` }));

/**
 * mount(8) as a mount helper that echoes its command line into its error (mount.cifs -v, a vendor's
 * helper) where the options hold ECHO_ON; the real mount(8) otherwise.
 */
const ECHO_ON = 'echo-5e1d=on';
function echoingMount(root: string): string {
  return wrappedTool(root, 'mount', `case "$*" in *${ECHO_ON}*) echo "mount: refused: mount $*" >&2; exit 32 ;; esac`).dir;
}

const KEY = 'acmeKey5e1d';
const VALUE = 'v4lue-5e1d-MUST-NOT-LEAK';
const OTHER = 'other-v-5e1d';
// A short one too: cut out of strings only, it must not turn `"readonly":false` into a line that is
// not JSON (logWhen parses every line).
const secrets = { [KEY]: VALUE, 'other-k-5e1d': OTHER, 'short-k-5e1d': 'false' };
// Values only: the driver's argv names each secret's key (kubernetes.io/secret/<key>), as kubelet sends it.
const FORBIDDEN = [VALUE, OTHER, Buffer.from(VALUE).toString('base64'), Buffer.from(OTHER).toString('base64')];

/** The methods called below, each with `secrets`. */
const METHODS = [
  'CreateVolume', 'ValidateVolumeCapabilities', 'ControllerPublishVolume', 'NodeStageVolume', 'NodePublishVolume', 'NodeExpandVolume',
  'ControllerExpandVolume', 'CreateSnapshot', 'GetSnapshot', 'ListSnapshots', 'DeleteSnapshot', 'ControllerModifyVolume',
  'CreateVolumeGroupSnapshot', 'GetVolumeGroupSnapshot', 'DeleteVolumeGroupSnapshot', 'ControllerUnpublishVolume', 'DeleteVolume',
];

describe('secrets never reach the log, at trace', () => {
  it('on every RPC that takes them, through the exec backend, and echoed in an error', async () => {
    const cap = mountCap();
    const id = 'ls-vol';
    const ctl = csi.ctl;
    const node = csi.node;
    await ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: { backend: 'dir' }, capacity_range: size(MiB), secrets });
    // A secret pasted into a parameter: the refusal quotes the value it refused, less the secret, in the
    // status too (the provisioner makes it an Event on the claim).
    const pasted = await outcome(ctl('CreateVolume', { name: 'ls-bad', volume_capabilities: [cap], parameters: { backend: VALUE }, secrets }));
    expect(pasted).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('backend "[redacted]" is unknown') });
    await outcome(ctl('ValidateVolumeCapabilities', { volume_id: id, volume_capabilities: [cap], secrets }));
    await ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap, secrets });
    const staging = stagingPath(csi.s.kubeletDir, id);
    mkdirSync(staging, { recursive: true });
    await node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap, secrets });
    const target = targetPath(csi.s.kubeletDir, 'pod-ls', id);
    await node('NodePublishVolume', { volume_id: id, staging_target_path: staging, target_path: target, volume_capability: cap, secrets });
    await outcome(node('NodeExpandVolume', { volume_id: id, volume_path: target, capacity_range: size(2 * MiB), secrets }));
    await outcome(ctl('ControllerExpandVolume', { volume_id: id, capacity_range: size(2 * MiB), volume_capability: cap, secrets }));
    const snap = await outcome(ctl('CreateSnapshot', { name: 'ls-snap', source_volume_id: id, secrets }));
    await outcome(ctl('GetSnapshot', { snapshot_id: 'ls-snap', secrets }));
    await outcome(ctl('ListSnapshots', { secrets }));
    await outcome(ctl('DeleteSnapshot', { snapshot_id: 'ls-snap', secrets }));
    await outcome(ctl('ControllerModifyVolume', { volume_id: id, mutable_parameters: { a: 'b' }, secrets } as never));
    const group = (method: 'CreateVolumeGroupSnapshot' | 'GetVolumeGroupSnapshot' | 'DeleteVolumeGroupSnapshot', req: object) => outcome(csi.client.call('GroupController', method, { ...req, secrets } as never));
    await group('CreateVolumeGroupSnapshot', { name: 'ls-group', source_volume_ids: [id] });
    await group('GetVolumeGroupSnapshot', { group_snapshot_id: 'ls-group' });
    await group('DeleteVolumeGroupSnapshot', { group_snapshot_id: 'ls-group' });

    // The exec backend: the noise driver prints its argv, the options JSON with the secret in base64.
    const execTarget = targetPath(csi.s.kubeletDir, 'pod-ls', 'ls-exec');
    await node('NodePublishVolume', { volume_id: 'ls-exec', target_path: execTarget, volume_capability: cap, volume_context: { backend: 'exec', driver: 'acme/noise' }, secrets });
    const driverCall = csi.calls('noise').find((c) => c[0] === 'mount');
    expect(JSON.stringify(driverCall)).toContain(Buffer.from(VALUE).toString('base64'));

    await node('NodeUnpublishVolume', { volume_id: 'ls-exec', target_path: execTarget });
    await node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    await node('NodeUnstageVolume', { volume_id: id, staging_target_path: staging });
    await ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a', secrets });
    await outcome(ctl('DeleteVolume', { volume_id: id, secrets }));

    const { text, entries } = await csi.server.logWhen((es) => es.some((e) => e.msg === 'rpc' && e.method === 'DeleteVolume'));
    // Every call was logged, and at trace with its request (its secrets map censored by shared/log.ts redact)...
    for (const m of METHODS) {
      expect(entries.some((e) => e.msg === 'rpc' && e.method === m), m).toBe(true);
      const requests = entries.filter((e) => e.msg === 'rpc request' && e.method === m);
      expect(requests.length, m).toBeGreaterThan(0);
      for (const r of requests) expect((r.request as Record<string, unknown>).secrets, m).toBe('[redacted]');
    }
    expect(snap.code).toBe('OK');
    // ...the driver's noise was logged, as the lenient reader set it aside, within the publish's call...
    const quirks = entries.filter((e) => e.msg === 'FlexVolume driver reply read leniently');
    expect(quirks).toEqual([expect.objectContaining({ level: 'warn', method: 'NodePublishVolume', volumeId: 'ls-exec', requestId: expect.any(String) })]);
    expect(JSON.stringify(quirks)).toContain('debug: called with mount');
    // ...the refused parameter's line is there, its value cut out...
    const refused = entries.filter((e) => e.msg === 'rpc' && e.method === 'CreateVolume' && e.code === 'INVALID_ARGUMENT');
    expect(refused).toEqual([expect.objectContaining({ message: expect.stringContaining('backend "[redacted]" is unknown') })]);
    // ...and no line holds a secret's value, as sent or in base64, nor does any series of the metrics.
    for (const s of FORBIDDEN) expect(text).not.toContain(s);
    const metrics = [...(await scrape(await metricsPort(csi.server))).keys()].join('\n');
    expect(metrics).toContain('method="CreateVolumeGroupSnapshot"');
    for (const s of FORBIDDEN) expect(metrics).not.toContain(s);
  });
});

describe('a password written inline among an exec volume\'s attributes (a PV\'s flexVolume.options)', () => {
  it('is cut from the driver\'s words that echo its options, as the secrets field is', async () => {
    const inline = 'inline-5e1d-MUST-NOT-LEAK';
    const id = 'ls-inline';
    const target = targetPath(csi.s.kubeletDir, 'pod-inline', id);
    // kubelet hands the driver a PV's options as they are: the password is in its options argument.
    await csi.node('NodePublishVolume', { volume_id: id, target_path: target, volume_capability: mountCap(), volume_context: { backend: 'exec', driver: 'acme/noise', password: inline, mountOptions: `vers=4,password=${inline}-mo` } });
    expect(csi.calls('noise').filter((c) => c[0] === 'mount' && c[1] === target && c[2]?.includes(`"password":"${inline}"`))).toHaveLength(1);
    await csi.node('NodeUnpublishVolume', { volume_id: id, target_path: target });
    const { text, entries } = await csi.server.logWhen((es) => es.some((e) => e.msg === 'rpc' && e.method === 'NodeUnpublishVolume' && e.volumeId === id));
    // The noise driver's argv was logged as the lenient reader set it aside, the password cut from it.
    const quirks = entries.filter((e) => e.msg === 'FlexVolume driver reply read leniently' && e.volumeId === id);
    expect(JSON.stringify(quirks)).toContain('\\"password\\":\\"[redacted]\\"');
    expect(text).not.toContain(inline);
  });
});

describe('a password among a static volume\'s mount options', () => {
  it('is cut from the debug lines of the mount it was given to, and from the error of that mount', async () => {
    const id = 'ls-static';
    const password = 'pw-5e1d-MUST-NOT-LEAK';
    const cap = mountCap();
    // tmpfs knows no password option: mount(2) refuses it, and mount(8), given the step, fails in its words.
    await csi.ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: { backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: `size=1m,password=${password}` } });
    await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
    const staging = stagingPath(csi.s.kubeletDir, id);
    mkdirSync(staging, { recursive: true });
    const staged = await outcome(csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap }));
    expect(staged.code).not.toBe('OK');
    expect(staged.message).toContain('password=[redacted]');
    expect(staged.message).not.toContain(password);
    const { entries } = await csi.server.logWhen((es) => es.some((e) => e.msg === 'rpc' && e.method === 'NodeStageVolume' && e.volumeId === id));
    // The lines of the mount itself (the request's own trace line holds the StorageClass's parameters as sent).
    const mountLines = entries.filter((e) => (e.msg === 'command' && e.tool === 'mount') || (e.msg === 'system call' && e.call === 'mount' && e.fsType === 'tmpfs'));
    expect(mountLines.length).toBeGreaterThan(0);
    expect(JSON.stringify(mountLines)).toContain('password=[redacted]');
    expect(JSON.stringify(mountLines)).not.toContain(password);
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
  });

  it('is cut from a failed mount\'s own words, which echo it', async () => {
    const id = 'ls-echo';
    const password = 'pw-echo-5e1d-MUST-NOT-LEAK';
    const cap = mountCap();
    await csi.ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: { backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: `size=1m,${ECHO_ON},password=${password}` } });
    await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
    const staging = stagingPath(csi.s.kubeletDir, id);
    mkdirSync(staging, { recursive: true });
    const staged = await outcome(csi.node('NodeStageVolume', { volume_id: id, staging_target_path: staging, volume_capability: cap }));
    // The helper's words are there, its echo of the password cut.
    expect(staged.message).toContain(`mount: refused: mount --no-canonicalize -t tmpfs -o size=1m,${ECHO_ON},password=[redacted]`);
    expect(staged.message).not.toContain(password);
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    const { text } = await csi.server.logWhen((es) => es.some((e) => e.msg === 'rpc' && e.method === 'ControllerUnpublishVolume' && e.volumeId === id));
    expect(text).not.toContain(password);
  });

  it('is cut from the trace line of every request that carries mount options (a parameter, a PV\'s mountOptions as mount_flags)', async () => {
    const id = 'ls-trace';
    const password = 'pw-trace-5e1d-MUST-NOT-LEAK';
    const flag = 'flag-5e1d-MUST-NOT-LEAK';
    const cap = mountCap('', 'SINGLE_NODE_WRITER', { mount_flags: [`password=${flag}`, 'noatime'] });
    await csi.ctl('CreateVolume', { name: id, volume_capabilities: [cap], parameters: { backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: `size=1m,password=${password}` } });
    await csi.ctl('ControllerPublishVolume', { volume_id: id, node_id: 'node-a', volume_capability: cap });
    await csi.ctl('ControllerUnpublishVolume', { volume_id: id, node_id: 'node-a' });
    const { text, entries } = await csi.server.logWhen((es) => es.some((e) => e.msg === 'rpc' && e.method === 'ControllerUnpublishVolume' && e.volumeId === id));
    // The options are still there for the operator, less the secret ones.
    const requests = entries.filter((e) => e.msg === 'rpc request' && e.volumeId === id && e.method !== 'ControllerUnpublishVolume').map((e) => JSON.stringify(e));
    expect(requests).toEqual([expect.stringContaining('"mountOptions":"size=1m,password=[redacted]"'), expect.stringContaining('"mount_flags":["password=[redacted]","noatime"]')]);
    expect(requests[0]).toContain('"mount_flags":["password=[redacted]","noatime"]');
    for (const s of [password, flag]) expect(text).not.toContain(s);
  });

  it('is left out of the refusal of an option whose characters mount options may not hold', async () => {
    const password = 'pw!5e1d-MUST-NOT-LEAK';
    const refused = await outcome(csi.ctl('CreateVolume', { name: 'ls-refused', volume_capabilities: [mountCap()], parameters: { backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: `size=1m,password=${password}` } }));
    expect(refused).toEqual({ code: 'INVALID_ARGUMENT', message: 'mountOptions: mount option "password=[redacted]" is not allowed' });
    const { text } = await csi.server.logWhen((es) => es.some((e) => e.msg === 'rpc' && e.method === 'CreateVolume' && e.volumeId === 'ls-refused'));
    expect(text).toContain('mount option \\"password=[redacted]\\" is not allowed');
    // The request's trace line holds it too, cut (shared/log.ts redact, the test above).
    expect(text).not.toContain(password);
  });
});
