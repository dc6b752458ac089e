// Generate the TypeScript stubs of the repository's proto/ into src/gen/ (committed).
// `--check` generates into a temporary directory instead and exits 1 when the committed
// files differ, so stale generated code never lands.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const repo = join(here, "..", "..");
const buf = join(here, "node_modules", ".bin", "buf");
const committed = join(here, "src", "gen");

function generate(outputBase) {
  execFileSync(buf, ["generate", repo, "--template", join(here, "buf.gen.yaml"), "--output", outputBase], {
    cwd: here,
    stdio: "inherit",
  });
}

function tree(root) {
  const files = new Map();
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else files.set(relative(root, path), readFileSync(path));
    }
  };
  try {
    walk(root);
  } catch (err) {
    if (err.code !== "ENOENT") throw err;
  }
  return files;
}

if (process.argv.includes("--check")) {
  const tmp = mkdtempSync(join(tmpdir(), "capgate-ts-gen-"));
  try {
    generate(tmp);
    const fresh = tree(join(tmp, "src", "gen"));
    const old = tree(committed);
    const stale = [...new Set([...fresh.keys(), ...old.keys()])]
      .filter((k) => !fresh.has(k) || !old.has(k) || !fresh.get(k).equals(old.get(k)))
      .sort();
    if (stale.length > 0) {
      console.error(`generated TypeScript is stale; run \`npm run gen\`:\n  ${stale.join("\n  ")}`);
      process.exit(1);
    }
    console.log(`src/gen is up to date (${fresh.size} files)`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
} else {
  generate(here);
}
