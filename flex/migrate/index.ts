import { readFileSync } from 'node:fs';
import { newObjects, OutError, reportLines, writeOut, yamlDocuments } from './emit.js';
import { InputError, inventory, parseSources, readSources } from './input.js';
import { type Mapping, parseMappingFile } from './mappings.js';
import { label, Refusal } from './objects.js';
import { plan } from './plan.js';

/**
 * `twinvol migrate plan`: packed on its own (scripts/build.mjs) and loaded by flex/cli.ts only for
 * this command, so neither kubelet's verbs nor the rest of the CLI load the YAML parser.
 * It reads objects and writes a plan; it never talks to a cluster.
 */
export interface MigratePlanArgs {
  files: readonly string[];
  prefer: 'exec' | 'vendor';
  mappings: readonly string[];
  out?: string;
  exec: boolean;
}

export interface Io {
  stdin: () => string;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  stdinIsTerminal: boolean;
}

const processIo: Io = {
  stdin: () => readFileSync(0, 'utf8'),
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  stdinIsTerminal: Boolean(process.stdin.isTTY),
};

/** Exit codes: 0 every FlexVolume PV planned, 1 some skipped (each said why), 2 a usage or input error. */
export function runMigratePlan(args: MigratePlanArgs, io: Io = processIo): number {
  const usage = (message: string) => {
    io.stderr(`twinvol migrate plan: ${message.replace(/\s+/g, ' ').trim()} (see: twinvol migrate plan --help)\n`);
    return 2;
  };
  const files = args.files.length ? args.files : ['-'];
  if (files.filter((f) => f === '-').length > 1) return usage('stdin ("-") can be read once');
  if (files.includes('-') && args.files.length === 0 && io.stdinIsTerminal) return usage('name the files to read, or - for stdin (stdin is a terminal)');
  try {
    const mappings: Mapping[] = readSources(args.mappings, io.stdin).flatMap(parseMappingFile);
    const objects = parseSources(readSources(files, io.stdin));
    const inv = inventory(objects);
    if (!inv.pvs.length) {
      const found = objects.slice(0, 3).map(label).join(', ');
      return usage(`no PersistentVolume in ${files.map((f) => (f === '-' ? 'stdin' : f)).join(', ')}${found ? ` (found ${found}${objects.length > 3 ? ', ...' : ''})` : ' (no objects at all)'}: give the output of kubectl get pv,pvc,pods,deploy,sts,ds,cronjobs,secrets -A -o yaml`);
    }
    const result = plan(inv, { preferVendor: args.prefer === 'vendor', mappings, exec: args.exec });
    if (args.out !== undefined) {
      const written = writeOut(args.out, result, files.map((f) => (f === '-' ? 'stdin' : f)));
      io.stderr(reportLines(result).map((l) => `${escapeControls(l)}\n`).join(''));
      io.stderr(`wrote ${args.out}: ${written.length} files (${written.filter((w) => w.startsWith('manifests/')).length} manifests, STEPS.md, migrate.sh, rollback.sh)\n`);
    } else {
      io.stdout(yamlDocuments(newObjects(result.moves).flat()));
      io.stderr(reportLines(result).map((l) => `${escapeControls(l)}\n`).join(''));
    }
    if (!result.moves.length && !result.skipped.length) io.stderr('nothing to move: no FlexVolume PV in the input\n');
    return result.skipped.length ? 1 : 0;
  } catch (err) {
    if (err instanceof InputError || err instanceof OutError || err instanceof Refusal) return usage(err.message);
    throw err;
  }
}

/** One message, one line: a control character from the input (a name with a newline) is shown escaped. */
function escapeControls(line: string): string {
  return line.replace(/[\u0000-\u001f\u007f]/g, (c) => JSON.stringify(c).slice(1, -1));
}
