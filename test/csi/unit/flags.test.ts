import { describe, expect, it } from 'vitest';
import { parseFlags, requireNodeId, UsageError } from '../../../csi/flags.js';

const EP = ['--endpoint', 'unix:///run/csi/csi.sock'];

/** The UsageError a command line raises (exit 2 in csi/main.ts), by its message. */
function usageError(argv: string[], env: Record<string, string> = {}): string {
  try {
    parseFlags(argv, env);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as UsageError).message;
  }
  throw new Error(`${JSON.stringify(argv)} was accepted`);
}

describe('flags: defaults and what each flag becomes', () => {
  it('only --endpoint is needed; everything else has its documented default', () => {
    expect(parseFlags(EP, {})).toEqual({
      help: false,
      version: false,
      socketPath: '/run/csi/csi.sock',
      exec: { only: false, pluginDir: '/usr/libexec/kubernetes/kubelet-plugins/volume/exec', lenient: [], inline: [], execIn: 'local' },
      mode: 'all',
      driverName: 'csi.twinvol.io',
      maxVolumesPerNode: 0,
      logLevel: 'info',
      overrides: { nodeName: undefined, dataRoot: undefined, dataRootScope: undefined, dataRootOnNetwork: undefined, stateDir: undefined, kubeletDir: undefined },
    });
  });

  it('every flag is read', () => {
    const f = parseFlags(
      [...EP, '--mode', 'node', '--node-id', 'n1', '--driver-name', 'csi.example.com', '--max-volumes-per-node', '16',
        '--data-root', '/d', '--data-root-scope', 'node', '--data-root-on-network', 'true', '--state-dir', '/s', '--kubelet-dir', '/k'],
      {},
    );
    expect(f).toMatchObject({ mode: 'node', driverName: 'csi.example.com', maxVolumesPerNode: 16 });
    expect(f.overrides).toEqual({ nodeName: 'n1', dataRoot: '/d', dataRootScope: 'node', dataRootOnNetwork: true, stateDir: '/s', kubeletDir: '/k' });
    expect(parseFlags([...EP, '--data-root-on-network', 'false'], {}).overrides.dataRootOnNetwork).toBe(false);
  });

  it('CSI_ENDPOINT stands in for --endpoint, and the flag wins over it', () => {
    expect(parseFlags([], { CSI_ENDPOINT: 'unix:///a.sock' }).socketPath).toBe('/a.sock');
    expect(parseFlags(EP, { CSI_ENDPOINT: 'unix:///a.sock' }).socketPath).toBe('/run/csi/csi.sock');
  });

  it.each([['unix:///p/s.sock'], ['unix:/p/s.sock'], ['/p/s.sock']])('endpoint %s is the socket /p/s.sock', (endpoint) => {
    expect(parseFlags(['--endpoint', endpoint], {}).socketPath).toBe('/p/s.sock');
  });

  it('--help (or -h) needs no endpoint', () => {
    expect(parseFlags(['--help'], {})).toMatchObject({ help: true, socketPath: '' });
    expect(parseFlags(['-h'], {}).help).toBe(true);
  });

  it('--version needs no endpoint', () => {
    expect(parseFlags(['--version'], {})).toMatchObject({ version: true, help: false, socketPath: '' });
  });

  // sun_path is 108 bytes with its NUL: the longest socket path that can be bound is 107 bytes.
  it('a socket path of 107 bytes is the longest allowed', () => {
    const path = `/${'s'.repeat(101)}.sock`;
    expect(parseFlags(['--endpoint', `unix://${path}`], {}).socketPath).toBe(path);
    expect(usageError(['--endpoint', `unix://${path}x`])).toBe('--endpoint socket path is 108 bytes; a unix socket path holds at most 107');
  });

  it('a 63-character driver name is the longest allowed', () => {
    expect(parseFlags([...EP, '--driver-name', `a${'b'.repeat(61)}c`], {}).driverName).toHaveLength(63);
  });
});

describe('flags: a command line that does not parse is a UsageError naming what is wrong', () => {
  it('no endpoint at all', () => {
    expect(usageError([])).toBe('--endpoint (or CSI_ENDPOINT) is required');
  });

  it.each([['unix://relative.sock'], ['tcp://127.0.0.1:10000'], ['/a/../b.sock'], ['/a//b.sock'], ['relative.sock']])('endpoint %j', (endpoint) => {
    expect(usageError(['--endpoint', endpoint])).toMatch(/must be unix:\/\/\/absolute\/path or an absolute path/);
  });

  it('an unknown flag, a positional argument, a flag without its value', () => {
    expect(usageError([...EP, '--node-name', 'x'])).toMatch(/node-name/);
    expect(usageError([...EP, 'serve'])).toMatch(/serve/);
    expect(usageError(['--endpoint'])).toMatch(/endpoint/);
    // A value that looks like a flag is taken for a missing value unless written --flag=value.
    expect(usageError([...EP, '--node-id', '--strict-nodes'])).toMatch(/node-id/);
  });

  it.each([['both'], ['Controller'], ['']])('--mode %j is not one of controller, node, all', (mode) => {
    expect(usageError([...EP, '--mode', mode])).toBe('--mode must be one of controller, node, all');
  });

  it.each([['-csi'], ['csi_twinvol'], ['csi.'], ['a'.repeat(64)], ['']])('--driver-name %j is not a domain-style name of at most 63 characters', (name) => {
    expect(usageError([...EP, `--driver-name=${name}`])).toMatch(/--driver-name must be a domain-style name/);
  });

  it.each([['-1'], ['1.5'], ['1e3'], ['ten'], ['1234567890'], ['']])('--max-volumes-per-node %j is not a whole number', (n) => {
    expect(usageError([...EP, `--max-volumes-per-node=${n}`])).toBe('--max-volumes-per-node must be a whole number');
  });
});

describe('flags: a node server needs to be told its node id', () => {
  const flags = (argv: string[]) => parseFlags([...EP, ...argv], {});
  it.each([['node'], ['all']])('--mode %s without --node-id or TWINVOL_NODE_NAME is refused', (mode) => {
    expect(() => requireNodeId(flags(['--mode', mode]), {})).toThrow(
      new UsageError(`--mode ${mode} needs --node-id (kubelet's node name, e.g. from the downward API's spec.nodeName) or TWINVOL_NODE_NAME`),
    );
  });

  it('--node-id, TWINVOL_NODE_NAME, or a controller (which has no node) will do', () => {
    expect(() => requireNodeId(flags(['--mode', 'node', '--node-id', 'n1']), {})).not.toThrow();
    expect(() => requireNodeId(flags(['--mode', 'all']), { TWINVOL_NODE_NAME: 'n1' })).not.toThrow();
    expect(() => requireNodeId(flags(['--mode', 'controller']), {})).not.toThrow();
  });
});
