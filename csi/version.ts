import pkg from '../package.json' with { type: 'json' };

/** GetPluginInfo's vendor_version: package.json's version, embedded by the bundler at build time. */
export const VENDOR_VERSION: string = pkg.version;
