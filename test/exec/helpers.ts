import { killIfStill } from '../helpers/kill-if-still.js';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { type CsiClient, type ServiceCall, serviceCall } from '../csi/helpers/client.js';
import { driverProcessesLeft } from '../csi/helpers/flavour.js';
import { createCsiScratch, type CsiScratch } from '../csi/helpers/scratch.js';
import { launchCsi, type RunningCsi } from '../csi/helpers/server.js';

/** The test drivers: each script is installed under the names that select its behaviour (see the scripts). */
const SCRIPTS: Record<string, string> = {
  loop: 'loop.sh',
  loopempty: 'loop.sh',
  loopresize: 'loop.sh',
  loopbare: 'loop.sh',
  loopcrash: 'loop.sh',
  tmpfs: 'tmpfs.sh',
  noise: 'tmpfs.sh',
  exit1: 'tmpfs.sh',
  stack: 'tmpfs.sh',
  hang: 'tmpfs.sh',
  daemon: 'tmpfs.sh',
  nofsgroup: 'tmpfs.sh',
  halfway: 'tmpfs.sh',
  verbose: 'tmpfs.sh',
  mountns: 'tmpfs.sh',
  metrics: 'tmpfs.sh',
};
export type TestDriver = keyof typeof SCRIPTS;
export const VENDOR = 'acme';
const DRIVERS_DIR = resolve(import.meta.dirname, 'drivers');

export interface ExecSuite {
  readonly s: CsiScratch;
  readonly server: RunningCsi;
  readonly client: CsiClient;
  /** kubelet's --volume-plugin-dir for this suite. */
  readonly pluginDir: string;
  identity: ServiceCall<'Identity'>;
  ctl: ServiceCall<'Controller'>;
  node: ServiceCall<'Node'>;
  /** Every call the driver logged so far, as its argv (verb first). */
  calls(driver: TestDriver): string[][];
  /** Pids the driver logged of processes it left running or hung in. */
  pids(driver: TestDriver): number[];
  driverPath(driver: TestDriver): string;
}

/** Installs the test drivers where kubelet would find them: <dir>/<vendor>~<name>/<name>. */
export function installDrivers(pluginDir: string): void {
  for (const [name, script] of Object.entries(SCRIPTS)) {
    const dir = join(pluginDir, `${VENDOR}~${name}`);
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(DRIVERS_DIR, script), join(dir, name));
    execFileSync('chmod', ['755', join(dir, name)]);
  }
}

/**
 * One scratch world with the test drivers installed and a CSI server pointed at them. `args(pluginDir)`
 * gives further flags, `env` further variables (the drivers inherit the server's environment). afterAll stops the server, kills what the drivers left running, and unmounts,
 * detaches and deletes everything, whether the tests passed or not.
 */
export function useExecServer(args: (pluginDir: string) => string[] = () => [], env: (s: CsiScratch) => NodeJS.ProcessEnv = () => ({})): ExecSuite {
  let scratch: CsiScratch | undefined;
  let running: RunningCsi | undefined;
  const need = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('the exec fixture is not started (used outside a test?)');
    return v;
  };
  const pluginDir = () => join(need(scratch).root, 'plugins');
  const driverDir = (driver: TestDriver) => join(pluginDir(), `${VENDOR}~${driver}`);
  const readLog = (driver: TestDriver, file: string) => driverLog(pluginDir(), driver, file);
  const suite: ExecSuite = {
    identity: serviceCall(() => need(running).client, 'Identity'),
    ctl: serviceCall(() => need(running).client, 'Controller'),
    node: serviceCall(() => need(running).client, 'Node'),
    get s() {
      return need(scratch);
    },
    get server() {
      return need(running);
    },
    get client() {
      return need(running).client;
    },
    get pluginDir() {
      return pluginDir();
    },
    calls: (driver) =>
      readLog(driver, 'calls.log')
        .split('\x1e')
        .filter(Boolean)
        .map((call) => call.split('\x1f').slice(1)),
    pids: (driver) => loggedPids(pluginDir(), driver),
    driverPath: (driver) => join(driverDir(driver), driver),
  };
  beforeAll(async () => {
    scratch = createCsiScratch('node-a');
    installDrivers(pluginDir());
    running = await launchCsi(scratch, { args: ['--flex-plugin-dir', pluginDir(), ...args(pluginDir())], env: env(scratch) });
  });
  afterAll(async () => {
    // No driver may outlive its call, and the server must have reaped every one (issue 9); what the
    // daemon and hang drivers leave on purpose is not theirs (it runs `sleep`, not the driver).
    const left = scratch && running?.child.pid !== undefined ? driverProcessesLeft(pluginDir(), running.child.pid) : [];
    await running?.stop();
    if (scratch) {
      killLoggedPids(pluginDir());
      scratch.cleanup();
    }
    expect(left, 'FlexVolume driver processes or zombies left after the suite').toEqual([]);
  });
  return suite;
}

/** What a test driver logged in its directory under `pluginDir` (calls.log, pids.log), or nothing. */
function driverLog(pluginDir: string, driver: TestDriver, file: string): string {
  const path = join(pluginDir, `${VENDOR}~${driver}`, file);
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}

/** Pids a test driver logged of what it left running or hung in (the hang and daemon drivers). */
export function loggedPids(pluginDir: string, driver: TestDriver): number[] {
  return driverLog(pluginDir, driver, 'pids.log').split('\n').filter(Boolean).map(Number);
}

/** Kills whatever every test driver under `pluginDir` logged, for cleanup whether the tests passed or not. */
export function killLoggedPids(pluginDir: string): void {
  for (const driver of Object.keys(SCRIPTS)) for (const pid of loggedPids(pluginDir, driver)) killLeftBehind(pid, pluginDir);
}

/**
 * SIGKILL to a pid a test driver under `pluginDir` logged, while it is still what the driver left:
 * its `sleep 300`, or the driver itself (test/exec/drivers/tmpfs.sh hang). Never a pid since reused.
 */
export function killLeftBehind(pid: number, pluginDir: string): void {
  killIfStill(pid, (argv) => (argv[0] === 'sleep' && argv[1] === '300') || argv.some((a) => a.startsWith(`${pluginDir}/`)));
}


/** The process is gone (or a zombie nobody has reaped yet: it runs nothing). */
export function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** The options JSON kubelet passes (the argument at `index` of a call). */
export function optionsOf(call: string[] | undefined, index: number): Record<string, string> {
  const text = call?.[index];
  if (text === undefined) throw new Error(`no argument ${index} in ${JSON.stringify(call)}`);
  return JSON.parse(text) as Record<string, string>;
}
