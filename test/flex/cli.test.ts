import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FLEX_BIN, runAdmin, runCli, runFlex } from '../helpers/flex-runner.js';
import { createScratch, type Scratch } from '../helpers/scratch.js';

// The administrator's CLI as a person meets it (issue 11, item 7): a refused command line stops
// with exit 2 and one line BEFORE anything is touched; --help and --version answer a person while
// kubelet's verbs stay its protocol; sizes are Kubernetes quantities.
let s: Scratch;
beforeAll(() => {
  s = createScratch('node-a');
});
afterAll(() => s.cleanup());

/** Nothing at all in the data root (not even the lock directory a create would take). */
const touched = () => (existsSync(s.dataRoot) ? readdirSync(s.dataRoot, { recursive: true }) : []);

describe('twinvol: a command line that does not parse', () => {
  it.each([
    // volume create: flags, values, and the checks that need the config (the default fsType)
    [['volume', 'create', 'v', '--size', '1Mi', '--access', 'many'], /Invalid values: Argument: access, Given: "many"/],
    [['volume', 'create', 'v', '--size', '1Mi', '--backend', 'nfs'], /Argument: backend, Given: "nfs"/],
    [['volume', 'create', 'v', '--size', '1Mi', '--data-root', '/elsewhere'], /Unknown arguments: data-root/],
    [['volume', 'create'], /Not enough non-option arguments/],
    [['volume', 'create', '../v', '--size', '1Mi'], /volume id "..\/v" must not contain/],
    [['volume', 'create', 'v'], /a block volume needs a size/],
    [['volume', 'create', 'v', '--backend', 'dir'], /a dir volume needs a size/],
    [['volume', 'create', 'v', '--size', '1.5'], /--size "1.5" is not a whole number of bytes/],
    [['volume', 'create', 'v', '--size', '1500m'], /--size "1500m" is not a whole number of bytes/],
    [['volume', 'create', 'v', '--size=-1Gi'], /--size "-1Gi" is negative/],
    [['volume', 'create', 'v', '--size', '2Pi'], /--size "2Pi" is larger than the 1 PiB limit/],
    [['volume', 'create', 'v', '--size', 'lots'], /--size "lots" is not a size/],
    // A blank around the quantity (a variable quoted with it) made a volume: the API's ParseQuantity,
    // which reads the PV written next, refuses it, as migrate plan does (shared/size.ts quantityBytes).
    [['volume', 'create', 'v', '--backend', 'dir', '--size', ' 1Mi'], /--size " 1Mi" is not a size/],
    [['volume', 'create', 'v', '--backend', 'dir', '--size', '1Mi '], /--size "1Mi " is not a size/],
    [['volume', 'create', 'v', '--backend', 'dir', '--size', '0'], /--size "0" must be a positive whole number of bytes/],
    [['volume', 'create', 'v', '--backend', 'dir', '--size', '-1Mi'], /--size "-1Mi" is negative/],
    [['volume', 'create', 'v', '--backend', 'dir', '--size', '1e30'], /--size "1e30" is larger than the 1 PiB limit/],
    [['volume', 'create', 'v', '--backend', 'dir', '--size', '9'.repeat(30)], /--size "9+" is larger than the 1 PiB limit/],
    [['volume', 'create', 'v', '--size', '299Mi', '--fs-type', 'xfs'], /size 299Mi is too small for xfs: mkfs.xfs refuses a filesystem smaller than 300 MiB; ask for at least 300Mi/],
    [['volume', 'create', 'v', '--size', '1Gi', '--fs-type', 'btrfs'], /fsType "btrfs" is not supported/],
    // Said as the type "undefined" once.
    [['volume', 'create', 'v', '--backend', 'static', '--source', 'tmpfs'], /fsType is required for static volumes/],
    // the other commands
    [['volume', 'delete', '../v'], /volume id "..\/v" must not contain/],
    [['volume', 'delete'], /Not enough non-option arguments/],
    [['volume', 'list', '--color'], /Unknown argument: color/],
    [['volume', 'inspect', 'a/b'], /volume id "a\/b" must not contain/],
    [['volume', 'release', 'v', 'bad node!'], /node name "bad node!" may only hold/],
    // yargs folded --node into the positional and acted on node-b alone.
    [['volume', 'release', 'v', 'node-b', '--node', 'node-c'], /name the node once/],
    [['volume', 'remove', 'v'], /Unknown arguments: remove, v/],
    [['volume'], /name a volume command/],
    [['node', 'list', 'extra'], /Unknown argument: extra/],
    [['node'], /name a node command/],
    // A flag given without its value took its default (or ""), silently: --backend alone made a block
    // volume, and an empty --fs-type the default type.
    [['volume', 'create', 'v', '--size', '1Mi', '--backend'], /Not enough arguments following: backend/],
    [['volume', 'create', 'v', '--size', '1Mi', '--access'], /Not enough arguments following: access/],
    [['volume', 'create', 'v', '--fs-type', '--size', '1Mi'], /Not enough arguments following: fs-type/],
    [['status', '--driver-name'], /Not enough arguments following: driver-name/],
    // A name twinvol-csi would refuse matched no staging path at all, and status said nothing of it.
    [['status', '--driver-name', '../../x'], /--driver-name must be a domain-style name/],
    [['status', '--driver-name', ''], /--driver-name is given an empty value/],
    // A boolean flag given a value read as false, whatever the value: --help=no created the volume,
    // --exec=0 and --json=1 were obeyed as their opposite or not at all.
    [['volume', 'list', '--json=1'], /--json \(given "1"\) must be "true" or "false"/],
    [['volume', 'list', '--json=yes'], /--json \(given "yes"\) must be "true" or "false"/],
    [['volume', 'list', '--json='], /--json= has no value/],
    [['volume', 'release', 'v', 'node-b', '--force=yes'], /--force \(given "yes"\) must be "true" or "false"/],
    [['volume', 'create', 'v', '--backend', 'dir', '--size', '1Mi', '--help=no'], /--help \(given "no"\) must be "true" or "false"/],
    [['volume', 'create', 'v', '--backend', 'dir', '--size', '1Mi', '-h=0'], /-h \(given "0"\) must be "true" or "false"/],
    [['migrate', 'plan', '--exec=0', '/dev/null'], /--exec \(given "0"\) must be "true" or "false"/],
    [['flex', 'check', '/bin/true', '--attachable=on'], /--attachable \(given "on"\) must be "true" or "false"/],
    // A first word that is a flag but not exactly --help, -h or --version was answered as a kubelet
    // call: {"status":"Not supported"}, exit 0.
    [['--version=1'], /--version \(given "1"\) must be "true" or "false"/],
    [['--help=yes'], /--help \(given "yes"\) must be "true" or "false"/],
    [['-h=1'], /-h \(given "1"\) must be "true" or "false"/],
    // An unknown flag before the command was answered "name a command", or its next word named instead
    // ("Unknown arguments: bogus, list"; "name a volume command").
    [['--versoin'], /^twinvol: unknown flag --versoin: name the command first; before it twinvol takes only --help, -h and --version \(/],
    [['-V'], /unknown flag -V: name the command first/],
    [['--bogus'], /unknown flag --bogus: name the command first/],
    [['--bogus=1'], /unknown flag --bogus: name the command first/],
    [['--bogus', 'volume', 'list'], /unknown flag --bogus: name the command first/],
    [['-x', 'volume', 'list'], /unknown flag -x: name the command first/],
    [['volume', '--bogus', 'list'], /unknown flag --bogus: name the volume command first/],
    [['volume', '--bogus'], /unknown flag --bogus: name the volume command first/],
    [['--help=no', '--bogus', 'volume', 'list'], /unknown flag --bogus: name the command first/],
    [['volume', '--json', 'list'], /unknown flag --json: name the volume command first/],
    [['migrate', '--out', '/tmp/x', 'plan'], /unknown flag --out: name the migrate command first/],
    [['status', 'extra', '--bogus'], /Unknown arguments?: .*bogus/],
    [['-'], /Unknown argument: -/],
    // yargs drops what follows "--" from every positional: the command ran without it (migrate plan
    // read stdin, not the file named; "-- init" printed nothing, exit 0).
    [['volume', 'list', '--', 'x'], /no twinvol command reads arguments after "--" \(given "x"\)/],
    [['migrate', 'plan', '--', '/dev/null'], /no twinvol command reads arguments after "--" \(given "\/dev\/null"\)/],
    [['--', 'init'], /no twinvol command reads arguments after "--" \(given "init"\)/],
    // An empty value (an unset variable, quoted) was read as "not given": --fs-type "" made an ext4
    // volume, --csi-server "" looked for a twinvol-csi of its own choosing.
    [['volume', 'create', 'v', '--size', '1Mi', '--fs-type', ''], /--fs-type is given an empty value/],
    [['volume', 'create', 'v', '--backend', 'dir', '--size', '1Mi', '--mount-options='], /--mount-options is given an empty value/],
    [['compare', '--rounds', '0', '--csi-server', ''], /--csi-server is given an empty value/],
    [['migrate', 'plan', '--mapping', ''], /--mapping is given an empty value/],
    [['migrate', 'verify', 'v', '--csi-bin', ''], /--csi-bin is given an empty value/],
    [['flex', 'check', ''], /name the driver file: flex check <driver>/],
    // Unchecked, they reached the driver's name or the driver's path and failed there, exit 1.
    [['migrate', 'verify', 'v', '--vendor', '../x'], /--vendor "..\/x" must be 1 to 63 letters/],
    [['migrate', 'verify', 'v', '--plugin-dir', 'relative'], /--plugin-dir "relative" must be an absolute, normalised path/],
    // mkdir's ENAMETOOLONG, exit 1.
    [['install', 'flex', '--plugin-dir', `/tmp/${'b'.repeat(300)}`], /--plugin-dir "\/tmp\/b+"\.\.\. is longer than Linux allows/],
  ])('%j: exit 2, one line naming what is wrong, nothing created', async (args, reason) => {
    const r = await runAdmin(s.env, args);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^twinvol: [^\n]+ \(see: twinvol --help\)\n$/);
    expect(r.stderr).toMatch(reason);
    expect(touched()).toEqual([]);
    expect(existsSync('/elsewhere')).toBe(false);
  });
});

describe('twinvol: words no shell quoting makes usable', () => {
  it('a word that is not UTF-8 is refused, not decoded into a path nobody named', () => {
    // Node puts U+FFFD where argv's bytes are not UTF-8: install flex made <root>/plugins-\uFFFD.
    const asked = `${s.root}/plugins-`;
    const r = spawnSync('/bin/sh', ['-c', `exec "$0" install flex --plugin-dir "$(printf '%s\\377' "$1")"`, FLEX_BIN, asked], { env: { PATH: '/usr/bin:/bin', ...s.env }, encoding: 'utf8' });
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 2, stdout: '' });
    expect(r.stderr).toMatch(/^twinvol: argument 4 \("[^\n]*"\) is not valid UTF-8 \(or holds U\+FFFD\): twinvol cannot name what it names \(see: twinvol --help\)\n$/);
    expect(existsSync(`${asked}\ufffd`)).toBe(false);
  });

  it('a huge value echoed in the line is cut to its start', async () => {
    const r = await runAdmin(s.env, ['volume', 'a'.repeat(100_000)]);
    expect(r).toEqual({ exitCode: 2, stdout: '', stderr: `twinvol: Unknown argument: ${'a'.repeat(200)}...(99800 more characters) (see: twinvol --help)\n` });
  });
});

describe('twinvol: a config that does not load', () => {
  // Every command that reads the config (install and uninstall write and read only the plugin dir,
  // compare and flex check run in worlds of their own; uninstall reads it to count mounts).
  const readers = [['volume', 'list'], ['volume', 'create', 'v', '--backend', 'dir', '--size', '1Mi'], ['volume', 'delete', 'v'], ['volume', 'inspect', 'v'], ['volume', 'release', 'v', 'node-b', '--force'], ['node', 'list'], ['status'], ['uninstall', 'flex', '--plugin-dir', '/nonexistent-plugins'], ['migrate', 'verify', 'v']];
  const broken: [string, string, string][] = [
    // A trailing comma: once "is not valid JSON" and no more, and migrate verify exit 1.
    ['a trailing comma', '{\n  "flexAttach": true,\n  "dataRoot": "/x",\n}\n', 'is not valid JSON at line 4, column 1 (Expected double-quoted property name)'],
    // V8 names no position for an unexpected token: found by the parse of the shortest prefix that fails.
    ['YAML, not JSON', '# twinvol\nflexAttach: false\n', 'is not valid JSON at line 1, column 1 (Unexpected token \'#\')'],
    ['a byte-order mark', '\ufeff{}', 'is not valid JSON at line 1, column 1 (Unexpected token \'\\ufeff\')'],
    ['empty', '', 'is not valid JSON at line 1, column 1 (Unexpected end of JSON input)'],
    // Once "setting flexAttach must be true or false", naming no file.
    ['a setting of the wrong type', '{"dataRoot": "/x", "flexAttach": "no"}', ': setting flexAttach must be true or false'],
    ['a setting the check names otherwise', '{"defaultFsType": "btrfs"}', ': setting defaultFsType: fsType "btrfs" is not supported for block volumes (use ext4 or xfs)'],
  ];

  it.each(broken)('%s: every command that reads it exits 2 with one line naming the file, where, and what', async (_what, text, wrong) => {
    const path = join(s.root, 'broken-config.json');
    writeFileSync(path, text);
    for (const args of readers) {
      const r = await runAdmin({ ...s.env, TWINVOL_CONFIG: path }, args);
      // No "(see: twinvol --help)": the help cannot mend a config file.
      expect({ args, ...r }).toEqual({ args, exitCode: 2, stdout: '', stderr: `twinvol: config file ${path}${wrong.startsWith(':') ? '' : ' '}${wrong}\n` });
    }
    expect(touched()).toEqual([]);
  });

  it('an environment variable that overrides a setting is named when its value is refused', async () => {
    const r = await runAdmin({ ...s.env, TWINVOL_DATA_ROOT: 'relative/data' }, ['volume', 'list']);
    expect(r).toEqual({ exitCode: 2, stdout: '', stderr: 'twinvol: TWINVOL_DATA_ROOT: setting dataRoot must be an absolute path\n' });
  });
});

describe('twinvol --help and --version, for a person', () => {
  it.each([[['--help']], [['-h']], [['volume', '--help']], [['volume', 'create', '--help']], [['install', 'flex', '--help']]])('%j prints help on stdout, exit 0', async (args) => {
    const r = await runAdmin(s.env, args);
    expect(r).toMatchObject({ exitCode: 0, stderr: '' });
    expect(r.stdout).toMatch(/^twinvol /);
    expect(r.stdout).toContain('--help');
    expect(() => JSON.parse(r.stdout)).toThrow();
  });

  it('the usage line names every command the executable takes for a person (flex/verb-names.ts)', async () => {
    const r = await runAdmin(s.env, ['--help']);
    const usage = r.stdout.split('\n')[0];
    const listed = [...r.stdout.matchAll(/^ {2}twinvol (\w+) /gm)].map((m) => m[1]);
    expect(listed).toEqual(expect.arrayContaining(['volume', 'status', 'compare', 'migrate']));
    for (const command of listed) expect(usage, command).toMatch(new RegExp(`[ |]${command}[ |]`));
  });

  it("migrate plan's help names the kubectl command whose output it needs, CronJobs included (they are suspended)", async () => {
    const r = await runAdmin(s.env, ['migrate', 'plan', '--help']);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.replace(/\s+/g, ' ')).toContain('kubectl get pv,pvc,pods,deploy,sts,ds,cronjobs,secrets -A -o yaml');
    // --out writes pods/ too (flex/migrate/emit.ts): the bare pods migrate.sh deletes and re-creates.
    expect(r.stdout.replace(/\s+/g, ' ')).toMatch(/--out write numbered manifests, rollback\/, pods\//);
  });

  it('--version prints the version', async () => {
    expect(await runAdmin(s.env, ['--version'])).toEqual({ exitCode: 0, stdout: expect.stringMatching(/^twinvol \d+\.\d+\.\d+\n$/), stderr: '' });
  });

  it.each([[['--version']], [['--help']], [['volume', 'list', '--json']]])('%j to a full disk (/dev/full): exit 1 and one line saying so', (args) => {
    const full = openSync('/dev/full', 'w');
    try {
      const r = spawnSync(FLEX_BIN, args, { stdio: ['ignore', full, 'pipe'], env: { PATH: '/usr/bin:/bin', ...s.env }, encoding: 'utf8' });
      expect(r.status).toBe(1);
      expect(r.stderr).toBe('twinvol: the output could not be written (ENOSPC)\n');
    } finally {
      closeSync(full);
    }
  });

  it('a boolean flag takes =true and =false, as every other boolean twinvol reads', async () => {
    expect(await runAdmin(s.env, ['volume', 'list', '--json=true'])).toEqual({ exitCode: 0, stdout: '[]\n', stderr: '' });
    expect(await runAdmin(s.env, ['volume', 'list', '--json=false'])).toEqual({ exitCode: 0, stdout: 'no volumes\n', stderr: '' });
  });

  it('help for a command runs nothing of it', async () => {
    expect((await runAdmin(s.env, ['volume', 'create', 'helped', '--backend', 'dir', '--size', '1Mi', '--help'])).exitCode).toBe(0);
    expect((await runAdmin(s.env, ['volume', 'list'])).stdout).not.toContain('helped');
  });

  it('kubelet\'s verbs are still its protocol, byte for byte', async () => {
    expect((await runFlex(s.env, ['init'])).output).toBe('{"status":"Success","capabilities":{"fsGroup":false}}');
    expect((await runFlex(s.env, ['getmetrics'])).output).toBe('{"status":"Not supported"}');
    expect((await runFlex(s.env, [])).output).toBe('{"status":"Not supported"}');
    expect((await runFlex(s.env, ['help'])).output).toBe('{"status":"Not supported"}');
    expect((await runFlex(s.env, ['init', '--version=1'])).output).toBe('{"status":"Success","capabilities":{"fsGroup":false}}');
  });
});

describe('twinvol volume: sizes, delete, list', () => {
  afterEach(async () => {
    for (const id of ['q1', 'q2', 'q3', 'q4']) await runCli(s.env, ['delete', id]);
  });

  it.each([
    ['q1', '1.5Gi', 1.5 * 2 ** 30],
    ['q2', '500M', 500_000_000],
    ['q3', '1e9', 1_000_000_000],
    ['q4', '100Ki', 100 * 1024],
  ])('--size %s... a Kubernetes quantity: %s is %d bytes', async (id, size, bytes) => {
    const r = await runCli(s.env, ['create', id, '--backend', 'dir', '--size', size, '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id, capacityBytes: bytes });
  });

  it('delete of a volume that does not exist says it is already gone, exit 0', async () => {
    expect(await runCli(s.env, ['delete', 'nope'])).toEqual({ exitCode: 0, stdout: 'already gone: volume nope does not exist\n', stderr: '' });
    expect((await runCli(s.env, ['create', 'q1', '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    expect(await runCli(s.env, ['delete', 'q1'])).toEqual({ exitCode: 0, stdout: 'deleted: q1\n', stderr: '' });
    expect(existsSync(join(s.dataRoot, 'volumes', 'q1'))).toBe(false);
  });

  it('list has a header, and --json the records', async () => {
    expect((await runCli(s.env, ['list'])).stdout).toBe('no volumes\n');
    expect((await runCli(s.env, ['create', 'q1', '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    expect((await runCli(s.env, ['create', 'q2', '--backend', 'dir', '--size', '2Mi', '--access', 'multi-node'])).exitCode).toBe(0);
    const r = await runCli(s.env, ['list']);
    expect(r.stdout.split('\n')).toEqual([
      'ID\tBACKEND\tSIZE\tFSTYPE\tACCESS\tATTACHMENTS',
      'q1\tdir\t1Mi\t-\tsingle-node\tnot attached',
      'q2\tdir\t2Mi\t-\tmulti-node\tnot attached',
      '',
    ]);
    const json = JSON.parse((await runCli(s.env, ['list', '--json'])).stdout) as { id: string; capacityBytes: number }[];
    expect(json.map((v) => [v.id, v.capacityBytes])).toEqual([['q1', 2 ** 20], ['q2', 2 * 2 ** 20]]);
  });

  it('list shows every record it can read, and names each damaged one on stderr with exit 1', async () => {
    for (const id of ['q1', 'q2']) expect((await runCli(s.env, ['create', id, '--backend', 'dir', '--size', '1Mi'])).exitCode).toBe(0);
    writeFileSync(join(s.dataRoot, 'volumes', 'q1', 'volume.json'), '{"schema":7,"id":"q1",');
    const damaged = `twinvol: volume q1 left out: state record ${join(s.dataRoot, 'volumes', 'q1', 'volume.json')} is corrupt (not JSON); `;
    // Once the first damaged record failed the whole listing.
    const r = await runCli(s.env, ['list']);
    expect({ exitCode: r.exitCode, stdout: r.stdout.split('\n').slice(1) }).toEqual({ exitCode: 1, stdout: ['q2\tdir\t1Mi\t-\tsingle-node\tnot attached', ''] });
    expect(r.stderr.startsWith(damaged) && r.stderr.split('\n').length === 2).toBe(true);
    const json = await runCli(s.env, ['list', '--json']);
    expect({ exitCode: json.exitCode, ids: (JSON.parse(json.stdout) as { id: string }[]).map((v) => v.id) }).toEqual({ exitCode: 1, ids: ['q2'] });
    expect(json.stderr.startsWith(damaged)).toBe(true);
    rmSync(join(s.dataRoot, 'volumes', 'q1'), { recursive: true });
  });
});
