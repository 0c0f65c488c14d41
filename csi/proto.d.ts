// esbuild's text loader (scripts/build.mjs) turns a .proto import into its source text, so the
// protocol travels inside the one bundled file.
declare module '*.proto' {
  const text: string;
  export default text;
}
