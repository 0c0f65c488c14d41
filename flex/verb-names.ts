/** Every verb the executable answers besides init; anything else is "Not supported" without loading more code. */
export const FLEX_VERBS = [
  'getvolumename',
  'attach',
  'isattached',
  'detach',
  'waitforattach',
  'mountdevice',
  'unmountdevice',
  'mount',
  'unmount',
  'expandvolume',
  'expandfs',
] as const;

export type FlexVerb = (typeof FLEX_VERBS)[number];

export function isFlexVerb(verb: string): verb is FlexVerb {
  return (FLEX_VERBS as readonly string[]).includes(verb);
}

/** The administrator's commands (flex/cli.ts), which kubelet never sends: human output and exit codes, not the JSON reply. */
export const ADMIN_COMMANDS: readonly string[] = ['volume', 'node', 'status', 'install', 'uninstall', 'flex', 'compare', 'migrate'];

/**
 * Whether argv's first word makes this a person's command line rather than a kubelet call: one of
 * ADMIN_COMMANDS, or any flag (`--help`, `-h`, `--version`, and as much `--version=1` or `--bogus`,
 * which the CLI refuses in one line). kubelet's first word is always one of its verbs (driver-call.go
 * in kubelet's pkg/volume/flexvolume: init, attach, mount, ...), never one that starts with "-".
 */
export function isAdminCommand(word: string): boolean {
  return word.startsWith('-') || ADMIN_COMMANDS.includes(word);
}
