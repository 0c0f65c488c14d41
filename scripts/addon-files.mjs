// Where the mount addon (native/*.c) is, for the scripts: what node-gyp builds from binding.gyp's
// target (relative to the checkout), and the name the build gives it beside the executables. The
// second is shared/native-mount.ts NATIVE_MOUNT_FILE again, since a .mjs script cannot import the
// TypeScript; test/shared/native-mount.test.ts checks the build put it under that name.
export const BUILT_ADDON = 'build/Release/twinvol_mount.node';
export const NATIVE_MOUNT_FILE = 'twinvol-mount.node';
