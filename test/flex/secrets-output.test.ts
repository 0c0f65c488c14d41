import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runAdmin } from '../helpers/flex-runner.js';
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

describe('a password among a static volume\'s mount options', () => {
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
