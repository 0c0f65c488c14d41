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
