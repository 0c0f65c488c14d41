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

/**
 * The administrator's commands (flex/cli.ts), which kubelet never sends: human output and exit codes,
 * not the JSON reply. --help and --version too, for a person trying the executable.
 */
export const ADMIN_COMMANDS: readonly string[] = ['volume', 'node', 'status', 'install', 'uninstall', 'flex', 'compare', 'migrate', '--help', '-h', '--version'];
