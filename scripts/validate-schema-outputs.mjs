// Checks `fuselm constraint-bench` output with a validator that is not fuselm: every complete
// generation must parse as JSON and validate under its schema (ajv, JSON Schema 2020-12, with
// ajv-formats' date, time, date-time, email and uuid). Prints a summary (validity, compile time
// median and p95, automaton and table sizes) and, with --out, writes it as JSON beside the model's
// name and sha256. Exits 1 when an output is invalid or a schema failed to compile.
//   node scripts/validate-schema-outputs.mjs RESULT.json [--schemas tests/fixtures/schemas]
//     [--model models/X.gguf] [--out SUMMARY.json]
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync, createReadStream } from "node:fs";
import { basename, join } from "node:path";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const resultPath = args[0];
if (!resultPath || resultPath.startsWith("--")) {
  console.error("usage: validate-schema-outputs.mjs RESULT.json [--schemas DIR] [--model FILE] [--out FILE]");
  process.exit(2);
}
const schemasDir = flag("--schemas", "tests/fixtures/schemas");
const result = JSON.parse(readFileSync(resultPath, "utf8"));
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
};

let complete = 0, cut = 0, invalid = 0, failed = 0;
const problems = [];
for (const row of result.schemas) {
  if (row.error) {
    failed++;
    problems.push(`${row.schema}: did not compile: ${row.error}`);
    continue;
  }
  const schema = JSON.parse(readFileSync(join(schemasDir, `${row.schema}.json`), "utf8"));
  const validate = ajv.compile(schema);
  for (const g of row.generations) {
    if (g.stopReason !== "end-of-generation") {
      cut++;
      continue;
    }
    complete++;
    let value;
    try {
      value = JSON.parse(g.text);
    } catch (e) {
      invalid++;
      problems.push(`${row.schema} seed ${g.seed}: not JSON (${e.message}): ${g.text}`);
      continue;
    }
    if (!validate(value)) {
      invalid++;
      problems.push(`${row.schema} seed ${g.seed}: ${ajv.errorsText(validate.errors)}: ${g.text}`);
    }
  }
}

const rows = result.schemas.filter((r) => !r.error);
const ms = rows.map((r) => r.compileMs);
const summary = {
  kind: "constraint-bench-summary",
  date: result.date,
  commit: result.commit,
  adapter: result.adapter,
  model: result.model,
  validator: `ajv ${JSON.parse(readFileSync(new URL("../node_modules/ajv/package.json", import.meta.url))).version} (2020-12) + ajv-formats`,
  schemas: result.schemas.length,
  compiled: rows.length,
  generations: complete + cut,
  complete,
  cutByMaxTokens: cut,
  invalid,
  compileMs: { median: quantile(ms, 0.5), p95: quantile(ms, 0.95), max: Math.max(...ms) },
  states: { median: quantile(rows.map((r) => r.states), 0.5), max: Math.max(...rows.map((r) => r.states)) },
  tableBytes: { median: quantile(rows.map((r) => r.tableBytes), 0.5), max: Math.max(...rows.map((r) => r.tableBytes)) },
  problems,
};

const modelPath = flag("--model");
if (modelPath) {
  const hash = createHash("sha256");
  await new Promise((ok, fail) => createReadStream(modelPath).on("data", (d) => hash.update(d)).on("end", ok).on("error", fail));
  summary.model = { name: basename(modelPath), sha256: hash.digest("hex") };
}
console.log(JSON.stringify({ ...summary, problems: problems.length }, null, 1));
for (const p of problems) console.error(p);
const out = flag("--out");
if (out) writeFileSync(out, JSON.stringify(summary, null, 1) + "\n");
process.exit(invalid || failed ? 1 : 0);
