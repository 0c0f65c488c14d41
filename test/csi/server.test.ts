import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type CallOutcome, createCsiClient, expectCode, outcome } from './helpers/client.js';
import { useCsiServer } from './helpers/fixture.js';
import { mountCap } from './helpers/requests.js';
import { createCsiScratch, type CsiScratch } from './helpers/scratch.js';
import { CSI_BIN, type LaunchOptions, launchCsi, runCsiOnce, scratchArgs, serverEnv } from './helpers/server.js';

const VERSION: string = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')).version;

describe('identity and capabilities (one server, mode all)', () => {
  const csi = useCsiServer({ nodeId: 'node-a' });

  it('names itself and its version', async () => {
    expect(await csi.client.call('Identity', 'GetPluginInfo')).toEqual({ name: 'csi.twinvol.io', vendor_version: VERSION, manifest: {} });
  });

  it('advertises the controller service and online expansion (topology only for a node-local data root: test/csi/topology.test.ts)', async () => {
    const r = await csi.client.call('Identity', 'GetPluginCapabilities');
    expect(r.capabilities.map((c) => (c.type === 'service' ? c.service.type : c.volume_expansion.type))).toEqual(['CONTROLLER_SERVICE', 'GROUP_CONTROLLER_SERVICE', 'ONLINE']);
  });

  it('is ready', async () => {
    expect(await csi.client.call('Identity', 'Probe')).toEqual({ ready: { value: true } });
  });

  it('lists exactly the controller capabilities it implements', async () => {
    const r = await csi.client.call('Controller', 'ControllerGetCapabilities');
    expect(r.capabilities.map((c) => c.rpc.type).sort()).toEqual(
      [
        'CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME', 'LIST_VOLUMES', 'GET_CAPACITY', 'CREATE_DELETE_SNAPSHOT', 'LIST_SNAPSHOTS',
        'CLONE_VOLUME', 'EXPAND_VOLUME', 'PUBLISH_READONLY', 'GET_VOLUME', 'VOLUME_CONDITION', 'LIST_VOLUMES_PUBLISHED_NODES',
        'SINGLE_NODE_MULTI_WRITER', 'GET_SNAPSHOT',
      ].sort(),
    );
  });

  it('lists exactly the node capabilities it implements', async () => {
    const r = await csi.client.call('Node', 'NodeGetCapabilities');
    expect(r.capabilities.map((c) => c.rpc.type)).toEqual([
      'STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION', 'SINGLE_NODE_MULTI_WRITER', 'VOLUME_MOUNT_GROUP',
    ]);
  });

  it('reports its node id, no volume limit, and its topology segment', async () => {
    expect(await csi.client.call('Node', 'NodeGetInfo')).toEqual({
      node_id: 'node-a',
      max_volumes_per_node: '0',
      accessible_topology: { segments: { 'topology.csi.twinvol.io/node': 'node-a' } },
    });
  });

  it('answers UNIMPLEMENTED for ControllerModifyVolume', async () => {
    await expectCode(csi.client.call('Controller', 'ControllerModifyVolume', { volume_id: 'x', mutable_parameters: { a: 'b' } }), 'UNIMPLEMENTED');
  });

  it('serves on a socket only its owner may use', () => {
    const st = lstatSync(csi.s.socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
  });

  it('logs one JSON line per call with method, volume, duration and code, and never a secret', async () => {
    await expectCode(
      csi.client.call('Controller', 'CreateVolume', {
        name: 'log-probe',
        volume_capabilities: [mountCap()],
        parameters: { backend: 'nonsense' },
        secrets: { password: 'hunter2-secret-value' },
      }),
      'INVALID_ARGUMENT',
    );
    await expectCode(csi.client.call('Controller', 'ControllerGetVolume', { volume_id: 'no-such-volume' }), 'NOT_FOUND');
    const { text, entries } = await csi.server.logWhen((all) => all.some((e) => e.method === 'ControllerGetVolume' && e.volumeId === 'no-such-volume'));
    expect(text).not.toContain('hunter2');
    const create = entries.filter((e) => e.method === 'CreateVolume' && e.volumeId === 'log-probe');
    expect(create).toHaveLength(1);
    expect(create[0]).toMatchObject({ msg: 'rpc', code: 'INVALID_ARGUMENT', level: 'warn' });
    expect(typeof create[0]?.durationMs).toBe('number');
    const get = entries.filter((e) => e.method === 'ControllerGetVolume' && e.volumeId === 'no-such-volume');
    expect(get).toHaveLength(1);
    expect(get[0]).toMatchObject({ code: 'NOT_FOUND', message: 'volume no-such-volume does not exist' });
    // Every line is one JSON object: nothing else (a stack trace, a warning) reaches stderr.
    expect(entries.every((e) => typeof e.time === 'string' && typeof e.level === 'string')).toBe(true);
  });
});

describe('start-up, flags and shutdown (a fresh process each)', () => {
  let s: CsiScratch | undefined;
  // Every process a test starts is stopped afterwards, even when an assertion failed first.
  const children: ChildProcess[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) {
        const gone = new Promise((r) => c.once('exit', r));
        c.kill('SIGKILL');
        await gone;
      }
    }
    s?.cleanup();
    s = undefined;
  });
  const fresh = () => (s = createCsiScratch('node-a'));
  const launch = async (w: CsiScratch, options?: LaunchOptions) => {
    const running = await launchCsi(w, options);
    children.push(running.child);
    return running;
  };
  const track = (c: ChildProcess) => {
    children.push(c);
    return c;
  };

  it.each([
    [['--bogus'], /Unknown option '--bogus'/],
    [['--endpoint', 'unix:///tmp/x.sock', '--mode', 'sideways'], /--mode must be one of controller, node, all/],
    [['--endpoint', 'unix:///tmp/x.sock', '--max-volumes-per-node=-1'], /--max-volumes-per-node must be a whole number/],
    [['--endpoint', 'unix:///tmp/x.sock', '--max-volumes-per-node', 'lots'], /--max-volumes-per-node must be a whole number/],
    [['--endpoint', 'unix:///tmp/x.sock', '--driver-name=-bad-'], /--driver-name must be a domain-style name/],
    [['--endpoint', 'relative/csi.sock'], /endpoint "relative\/csi.sock" must be unix:\/\/\/absolute\/path/],
    [['--endpoint', 'unix:///tmp/x.sock', '--data-root', 'relative'], /setting dataRoot must be an absolute path/],
    [['--endpoint', 'unix:///tmp/x.sock', '--data-root-scope', 'cluster'], /--data-root-scope must be one of shared, node/],
    [['--endpoint', 'unix:///tmp/x.sock', '--data-root-on-network', 'yes'], /--data-root-on-network must be true or false/],
    [['--endpoint', 'unix:///tmp/x.sock', 'stray-positional'], /Unexpected argument 'stray-positional'/],
    [[], /--endpoint \(or CSI_ENDPOINT\) is required/],
  ])('refuses %j with a message on stderr and exit code 2', async (args, message) => {
    const w = fresh();
    const r = await runCsiOnce(args, serverEnv(w));
    expect(r.code).toBe(2);
    // One line, not the usage text: the orchestrator shows the last line of a failed container.
    expect(r.stderr).toMatch(/^twinvol-csi: .+ \(see: twinvol-csi --help\)\n$/);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });

  it('prints usage for --help and exits 0', async () => {
    const r = await runCsiOnce(['--help'], { PATH: '/usr/bin:/bin' });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('--endpoint');
  });

  it('takes CSI_ENDPOINT as a bare path and removes its socket on SIGTERM', async () => {
    const w = fresh();
    const child = track(
      spawn(process.execPath, [CSI_BIN, ...scratchArgs(w, 'node-a').slice(2)], {
        env: { ...serverEnv(w), CSI_ENDPOINT: w.socketPath },
        stdio: ['ignore', 'ignore', 'pipe'],
      }),
    );
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const client = createCsiClient(w.socketPath);
    let ready = false;
    for (let i = 0; i < 200 && !ready; i++) {
      ready = existsSync(w.socketPath) && (await outcome(client.call('Identity', 'Probe'))).code === 'OK';
      if (!ready) await new Promise((r) => setTimeout(r, 50));
    }
    client.close();
    child.kill('SIGTERM');
    expect(ready).toBe(true);
    expect(await exited).toBe(0);
    expect(existsSync(w.socketPath)).toBe(false);
  });

  it('removes a socket file left behind by a crashed server', async () => {
    const w = fresh();
    mkdirSync(dirname(w.socketPath), { recursive: true });
    // A bound socket whose process is gone: made in a child that is killed without cleanup.
    const leftover = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(w.socketPath)}, () => process.kill(process.pid, 'SIGKILL'))`]);
    await new Promise((r) => leftover.on('exit', r));
    expect(lstatSync(w.socketPath).isSocket()).toBe(true);
    const running = await launch(w);
    expect((await running.client.call('Identity', 'Probe')).ready.value).toBe(true);
    expect(await running.stop()).toBe(0);
    expect(existsSync(w.socketPath)).toBe(false);
  });

  it('stops on SIGINT too', async () => {
    const running = await launch(fresh());
    running.client.close();
    running.child.kill('SIGINT');
    expect(await running.stop()).toBe(0);
    expect(existsSync(s!.socketPath)).toBe(false);
  });

  it('never deletes a file at the socket path that is not a socket', async () => {
    const w = fresh();
    mkdirSync(dirname(w.socketPath), { recursive: true });
    writeFileSync(w.socketPath, 'precious');
    const r = await runCsiOnce(scratchArgs(w, 'node-a'), serverEnv(w));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('is not a socket');
    expect(readFileSync(w.socketPath, 'utf8')).toBe('precious');
  });

  it('refuses a TWINVOL_NATIVE_MOUNT that is neither on nor off, in one line, and binds nothing', async () => {
    const w = fresh();
    const r = await runCsiOnce(scratchArgs(w, 'node-a'), { ...serverEnv(w), TWINVOL_NATIVE_MOUNT: '0' });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('twinvol-csi: TWINVOL_NATIVE_MOUNT must be on or off, not "0"\n');
    expect(existsSync(w.socketPath)).toBe(false);
  });

  it('refuses to take over a socket a live server is listening on', async () => {
    const w = fresh();
    const first = await launch(w);
    try {
      const r = await runCsiOnce(scratchArgs(w, 'node-b'), serverEnv(w));
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('another server is listening');
      expect((await first.client.call('Node', 'NodeGetInfo')).node_id).toBe('node-a');
    } finally {
      await first.stop();
    }
  });

  it('--mode node serves no controller, and says so in its capabilities', async () => {
    const running = await launch(fresh(), { args: ['--mode', 'node', '--max-volumes-per-node', '3'] });
    try {
      await expectCode(running.client.call('Controller', 'ControllerGetCapabilities'), 'UNIMPLEMENTED');
      const caps = await running.client.call('Identity', 'GetPluginCapabilities');
      expect(caps.capabilities.some((c) => 'service' in c && c.service.type === 'CONTROLLER_SERVICE')).toBe(false);
      expect((await running.client.call('Node', 'NodeGetInfo')).max_volumes_per_node).toBe('3');
    } finally {
      await running.stop();
    }
  });

  it('--mode controller serves no node service', async () => {
    const running = await launch(fresh(), { args: ['--mode', 'controller'] });
    try {
      await expectCode(running.client.call('Node', 'NodeGetInfo'), 'UNIMPLEMENTED');
      expect((await running.client.call('Controller', 'ControllerGetCapabilities')).capabilities.length).toBe(14);
    } finally {
      await running.stop();
    }
  });

  it('Probe answers FAILED_PRECONDITION when the node tools are missing', async () => {
    const w = fresh();
    // A private mount namespace where /usr/sbin (losetup, blkid, mkfs.*) is an empty tmpfs. The new
    // namespace starts as a copy of every mount, those other test files hold under /tmp included; a
    // copy keeps their filesystems (and loop devices) busy after those files unmount them, so this
    // namespace lets go of them first: a test elsewhere saw "still in use as /dev/loop0" otherwise.
    const dropOthers = "awk '$2 ~ /^[/]tmp[/]/ {print $2}' /proc/self/mounts | sort -r | xargs -r -n1 umount -l";
    const child = track(
      spawn('unshare', ['-m', '--propagation', 'private', 'sh', '-c', `${dropOthers}; mount -t tmpfs none /usr/sbin && exec "$0" "$@"`, process.execPath, CSI_BIN, ...scratchArgs(w, 'node-a')], {
        env: serverEnv(w),
        stdio: ['ignore', 'ignore', 'pipe'],
      }),
    );
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const client = createCsiClient(w.socketPath);
    try {
      let probe: CallOutcome = { code: 'UNAVAILABLE', message: 'never answered' };
      for (let i = 0; i < 200; i++) {
        if (existsSync(w.socketPath)) {
          probe = await outcome(client.call('Identity', 'Probe'));
          if (probe.code !== 'UNAVAILABLE') break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(probe.code).toBe('FAILED_PRECONDITION');
      expect(probe.message).toMatch(/required tools are missing: .*losetup/);
    } finally {
      client.close();
      child.kill('SIGTERM');
      await exited;
    }
  });
});
