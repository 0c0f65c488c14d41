import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { flexOptions, flexSession, runAdmin } from '../helpers/flex-runner.js';
import { deviceMountPath } from '../helpers/kubelet-paths.js';
import { createScratch } from '../helpers/scratch.js';
import { wrappedTool } from '../helpers/tool-wrapper.js';

/**
 * A static volume's password (a CIFS `password=` among its mountOptions) through the FlexVolume
 * executable and the admin CLI: never in a reply to kubelet (which puts it in the pod's events), the
 * FlexVolume log or what the CLI prints, even where a mount helper echoes its command line or the
 * option is refused for its characters. The CSI server's side: test/csi/logs-secrets.test.ts.
 */
const s = createScratch('node-a', '/tmp/twinvol-test-secrets-output-');
afterAll(() => s.cleanup());

/** mount(8) as a helper that echoes its command line into its error where the options hold ECHO_ON. */
const ECHO_ON = 'echo-7c2a=on';
const mount = wrappedTool(s.root, 'mount', `case "$*" in *${ECHO_ON}*) echo "mount: refused: mount $*" >&2; exit 32 ;; esac`);
const env = () => ({ ...s.env, PATH: `${mount.dir}:/usr/bin:/bin` });
const { flex, ok } = flexSession(env);
const flexLog = () => readFileSync(join(s.stateDir, 'log/flex.log'), 'utf8');

describe('a password among a static volume\'s mount options', () => {
  it('is cut from the words of a mount helper that echoes it, in the reply and the log', async () => {
    const password = 'pw-7c2a-MUST-NOT-LEAK';
    const opts = flexOptions('pv-echo', { volumeId: 'echo', createIfMissing: 'true', backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: `size=1m,${ECHO_ON},password=${password}` });
    await ok('attach', opts, 'node-a');
    const global = deviceMountPath(s.kubeletDir, 'pv-echo');
    mkdirSync(global, { recursive: true });
    const r = await flex('mountdevice', global, '', opts);
    expect(r.reply.status).toBe('Failure');
    // The helper ran and its words are there, the password cut from them as from the argv.
    expect(mount.calls().some((c) => c.includes(password))).toBe(true);
    expect(r.reply.message).toContain(`mount: refused: mount --no-canonicalize -t tmpfs -o size=1m,${ECHO_ON},password=[redacted]`);
    expect(r.output).not.toContain(password);
    expect(flexLog()).toContain('password=[redacted]');
    expect(flexLog()).not.toContain(password);
    await ok('detach', 'pv-echo', 'node-a');
  });

  it('is left out of the refusal of an option whose characters mount options may not hold', async () => {
    const password = 'pw!7c2a-MUST-NOT-LEAK';
    const r = await flex('attach', flexOptions('pv-refused', { volumeId: 'refused', createIfMissing: 'true', backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: `size=1m,password=${password}` }), 'node-a');
    expect(r.reply).toEqual({ status: 'Failure', message: 'mountOptions: mount option "password=[redacted]" is not allowed' });
    const cli = await runAdmin(env(), ['volume', 'create', 'refused', '--backend', 'static', '--source', 'tmpfs', '--fs-type', 'tmpfs', '--mount-options', `password=${password}`]);
    expect(cli.exitCode).toBe(2);
    expect(cli.stderr).toContain('mount option "password=[redacted]" is not allowed');
    expect(`${cli.stdout}${cli.stderr}${flexLog()}`).not.toContain(password);
  });

  it('is cut from what the admin CLI prints of the record (status --json, volume list --json, inspect, create --json)', async () => {
    const password = 'pw-cli-7c2a-MUST-NOT-LEAK';
    const created = await runAdmin(env(), ['volume', 'create', 'shown', '--backend', 'static', '--source', 'tmpfs', '--fs-type', 'tmpfs', '--mount-options', `size=1m,password=${password}`, '--json']);
    expect(created.exitCode).toBe(0);
    // The record keeps it: the mount needs it (records are root's alone: test/reliability/secrets-access.test.ts).
    expect(readFileSync(join(s.dataRoot, 'volumes/shown/volume.json'), 'utf8')).toContain(password);
    const shown = [created, ...(await Promise.all([['status', '--json'], ['volume', 'list', '--json'], ['volume', 'inspect', 'shown']].map((args) => runAdmin(env(), args))))];
    for (const r of shown) {
      expect(r.stdout).toContain('"size=1m",\n');
      expect(r.stdout).toContain('"password=[redacted]"');
      expect(`${r.stdout}${r.stderr}`).not.toContain(password);
    }
  });
});

describe('CIFS\'s short name for its password, pass=', () => {
  it('is a password too: cut from the argv, the helper\'s words, the log and the record shown', async () => {
    const password = 'pass-7c2a-MUST-NOT-LEAK';
    const opts = flexOptions('pv-pass', { volumeId: 'pass', createIfMissing: 'true', backend: 'static', source: 'tmpfs', fsType: 'tmpfs', mountOptions: `size=1m,${ECHO_ON},pass=${password}` });
    await ok('attach', opts, 'node-a');
    const global = deviceMountPath(s.kubeletDir, 'pv-pass');
    mkdirSync(global, { recursive: true });
    const r = await flex('mountdevice', global, '', opts);
    expect(r.reply.message).toContain(`-o size=1m,${ECHO_ON},pass=[redacted] `);
    const inspect = await runAdmin(env(), ['volume', 'inspect', 'pass']);
    expect(inspect.stdout).toContain('"pass=[redacted]"');
    for (const text of [r.output, flexLog(), inspect.stdout]) expect(text).not.toContain(password);
    await ok('detach', 'pv-pass', 'node-a');
  });
});

describe('a call\'s own secret (kubernetes.io/secret/<key>)', () => {
  it('is cut from a refusal that quotes a field it was pasted into, in the reply and the log', async () => {
    const secret = 'S3CR3T-7c2a-pasted';
    const base64 = Buffer.from(secret).toString('base64');
    const r = await flex('attach', flexOptions('pv-pasted', { volumeId: 'pasted', createIfMissing: 'true', size: secret, 'kubernetes.io/secret/password': base64 }), 'node-a');
    expect(r.reply.status).toBe('Failure');
    expect(r.reply.message).toMatch(/^size "\[redacted\]" is not a size/);
    for (const form of [secret, base64]) expect(`${r.output}${flexLog()}`).not.toContain(form);
  });
});
