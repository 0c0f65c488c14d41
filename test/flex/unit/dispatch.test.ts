import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { dispatch } from '../../../flex/dispatch.js';
import { exitCodeOf } from '../../../flex/reply.js';
import { goJson } from '../../helpers/go-json.js';

/**
 * flex/dispatch.ts is not pure: it reads the config and appends to the call log before any rule runs.
 * It is run here in-process against a temporary config, catalog and state directory; nothing is mounted.
 */
let root: string;
beforeEach(() => {
  root = mkdtempSync('/tmp/twinvol-dispatch-');
  writeFileSync(join(root, 'config.json'), '{}\n');
  vi.stubEnv('TWINVOL_CONFIG', join(root, 'config.json'));
  vi.stubEnv('TWINVOL_DATA_ROOT', join(root, 'data'));
  vi.stubEnv('TWINVOL_STATE_DIR', join(root, 'state'));
  vi.stubEnv('TWINVOL_KUBELET_DIR', join(root, 'kubelet'));
  vi.stubEnv('TWINVOL_NODE_NAME', 'node-a');
});
afterEach(() => {
  vi.unstubAllEnvs();
  rmSync(root, { recursive: true, force: true });
});

const logLines = () => readFileSync(join(root, 'state/log/flex.log'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

describe('FlexVolume dispatch: every failure is one Failure reply (exit 1) with a message safe to show', () => {
  it.each([
    ['attach', ['{}'], 'attach takes 2 arguments (attach <json> <node>), got 1'],
    ['unmount', [], 'unmount takes 1 argument (unmount <podVolumeDir>), got 0'],
    ['getvolumename', ['{}', 'extra'], 'getvolumename takes 1 argument (getvolumename <json>), got 2'],
  ])('%s with the wrong number of arguments names its usage', async (verb, args, message) => {
    const reply = await dispatch(verb as 'attach', args);
    expect(reply).toEqual({ status: 'Failure', message });
    expect(exitCodeOf(reply)).toBe(1);
  });

  it('a core error becomes its message, and the log line keeps its code', async () => {
    expect(await dispatch('getvolumename', ['{'])).toEqual({ status: 'Failure', message: 'the options argument is not valid JSON' });
    expect(await dispatch('getvolumename', [goJson({ volumeId: 'ghost' })])).toEqual({
      status: 'Failure',
      message: 'volume ghost does not exist: create it with "twinvol volume create", or set createIfMissing and size',
    });
    expect(logLines()).toMatchObject([
      { level: 'error', call: 'getvolumename', status: 'Failure', code: 'InvalidArgument' },
      { level: 'error', call: 'getvolumename', status: 'Failure', code: 'NotFound', volumeId: 'ghost' },
    ]);
  });

  it('a config that cannot be read is a Failure naming the file, with no log (there is no state dir to log to)', async () => {
    writeFileSync(join(root, 'config.json'), '{ not json');
    expect(await dispatch('isattached', ['{}', 'node-a'])).toEqual({ status: 'Failure', message: `config file ${join(root, 'config.json')} is not valid JSON at line 1, column 3 (Expected property name or '}')` });
  });

  it('a secret that fails validation is named by key; neither the reply nor the log holds its value', async () => {
    const reply = await dispatch('getvolumename', [goJson({ 'kubernetes.io/secret/password': 'hunter2!!' })]);
    expect(reply).toEqual({ status: 'Failure', message: 'secret "password" is not base64' });
    expect(readFileSync(join(root, 'state/log/flex.log'), 'utf8')).not.toContain('hunter2');
  });

  it('a call that succeeds is Success (exit 0), logged with its volume', async () => {
    const reply = await dispatch('isattached', [goJson({ volumeId: 'ghost' }), 'node-a']);
    expect(reply).toEqual({ status: 'Success', attached: false });
    expect(exitCodeOf(reply)).toBe(0);
    expect(logLines()).toMatchObject([{ level: 'info', call: 'isattached', status: 'Success', volumeId: 'ghost' }]);
  });
});
