/** Modules scripts/build.mjs packs into the executable: name -> minified CommonJS, gzipped, base64. */
declare module 'twinvol:packed' {
  const packed: Readonly<Record<string, string>>;
  export default packed;
}
