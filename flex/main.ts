// The FlexVolume executable. kubelet starts it once per call and parses stdout+stderr as one JSON
// document, so start-up stays minimal: `init` and unknown verbs are answered from here with only
// the config reader loaded; the rest (state, locks, yargs) is loaded when a verb needs it.
import { join } from 'node:path';
import { type Config, loadConfig } from '../shared/index.js';
import { CompileCache } from './compile-cache.js';
import { loadPacked } from './packed-modules.js';
import { failure, type FlexReply, notSupported, sendReply, success } from './reply.js';
import { isAdminCommand, isFlexVerb } from './verb-names.js';

// Anything Node would print (a warning, a deprecation) would corrupt the reply.
process.removeAllListeners('warning');
process.on('warning', () => undefined);

function init(): FlexReply {
  const config = loadConfig();
  // fsGroup:false because twinvol applies fsGroup itself on mount; attach only when not the default.
  return success({ capabilities: config.flexAttach ? { fsGroup: false } : { attach: false, fsGroup: false } });
}

async function main(argv: readonly string[]): Promise<void> {
  const [verb = '', ...args] = argv;
  if (verb === 'init') {
    sendReply(init());
    return;
  }
  // The administrator's CLI (and any flag: --help, --version, a malformed one); kubelet never sends
  // these. Anything else unknown is "Not supported", because kubelet parses whatever is printed as the reply.
  if (isAdminCommand(verb)) {
    let cli: typeof import('./cli.js');
    try {
      cli = loadPacked<typeof import('./cli.js')>('cli');
    } catch (err) {
      // A person's command, so a line for a person (the CLI's own way), not kubelet's JSON.
      process.stderr.write(`twinvol: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
      return;
    }
    // Output that could not be written (a full disk, a closed pipe) is a failed command: said once on
    // stderr, exit 1. Unheld, the error reached `fatal`, whose JSON reply to the same stdout failed
    // too, and `--version >/dev/full` exited 0.
    let unwritten = false;
    process.stdout.on('error', (err: NodeJS.ErrnoException) => {
      if (!unwritten) process.stderr.write(`twinvol: the output could not be written (${err.code ?? err.message})\n`);
      unwritten = true;
      process.exitCode = 1;
    });
    const code = await cli.runCli(argv, loadPacked);
    process.exitCode = unwritten ? 1 : code;
    return;
  }
  if (!isFlexVerb(verb)) {
    sendReply(notSupported());
    return;
  }
  // Read once here for the compile cache's place and handed on; a config that does not load is left
  // for dispatch to report as the call's Failure.
  let config: Config | undefined;
  try {
    config = loadConfig();
  } catch {
    // Reported by dispatch, which reads it again.
  }
  const cache = config && CompileCache.open(join(config.stateDir, 'cache'), verb);
  sendReply(await loadPacked<typeof import('./dispatch.js')>('dispatch', cache).dispatch(verb, args, config));
}

function fatal(err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  sendReply(failure(`twinvol: ${message}`));
}

process.on('uncaughtException', fatal);
process.on('unhandledRejection', fatal);
main(process.argv.slice(2)).catch(fatal);
