// Generates the TypeScript types of the CSI messages from csi/proto/csi.proto with @grpc/proto-loader's
// own generator, into csi/generated/ (not committed). The options are the ones csi/definition.ts loads
// the protocol with (LOADER_OPTIONS): field names as written, int64 as strings, enums by name, defaults
// filled, oneof names; so the types describe exactly the objects the server and the tests handle.
// Type-only: the bundles (scripts/build.mjs) need none of it, `tsc` needs all of it. Skipped when the
// output is newer than the proto and was made by this generator version with these options (about
// 0.15 s skipped against 0.4 s generated); `--force` regenerates.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const proto = join(root, 'csi/proto/csi.proto');
const out = join(root, 'csi/generated');
const stamp = join(out, 'package.json');

const loaderPackage = createRequire(import.meta.url).resolve('@grpc/proto-loader/package.json');
const generator = join(dirname(loaderPackage), 'build/bin/proto-loader-gen-types.js');
const options = ['--keepCase', '--longs=String', '--enums=String', '--defaults', '--oneofs', '--grpcLib=@grpc/grpc-js'];
// What the output depends on besides the proto: an upgraded generator or changed options must not
// leave the old types in place, and file times cannot tell (npm may give package files a fixed date).
const made = `${JSON.parse(readFileSync(loaderPackage, 'utf8')).version} ${options.join(' ')}`;

const fresh = () => statSync(stamp).mtimeMs >= statSync(proto).mtimeMs && JSON.parse(readFileSync(stamp, 'utf8')).twinvolGeneratedBy === made;
if (existsSync(stamp) && !process.argv.includes('--force') && fresh()) process.exit(0);

rmSync(out, { recursive: true, force: true });
const r = spawnSync(process.execPath, [generator, 'csi.proto', ...options, `--outDir=${out}`, `--includeDirs=${dirname(proto)}`], { cwd: root, encoding: 'utf8' });
if (r.status !== 0) {
  console.error(`proto-loader-gen-types failed (exit ${r.status}):\n${(r.stderr || r.stdout).slice(0, 4000)}`);
  process.exit(1);
}
// The generator writes extensionless relative imports, which TypeScript accepts only in CommonJS
// files: the folder is marked so. Written last, it is also the stamp that says the output is whole,
// and by what it was made.
mkdirSync(out, { recursive: true });
writeFileSync(stamp, `${JSON.stringify({ type: 'commonjs', twinvolGeneratedBy: made }, null, 2)}\n`);
