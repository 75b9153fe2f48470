// The consumer (consumer/consumer.ts) must import every export of the package's entry
// (dist/index.d.ts), so that a new public function or type cannot ship without being
// type-checked from a downstream project; noUnusedLocals in its tsconfig makes each import used.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const path = (p) => fileURLToPath(new URL(p, import.meta.url));
const index = path("../../dist/index.d.ts");
const program = ts.createProgram([index], { noEmit: true, moduleResolution: ts.ModuleResolutionKind.Bundler, module: ts.ModuleKind.ESNext });
const checker = program.getTypeChecker();
const exported = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(index))).map((s) => s.getName());

const consumerPath = path("consumer/consumer.ts");
const consumer = ts.createSourceFile(consumerPath, readFileSync(consumerPath, "utf8"), ts.ScriptTarget.Latest);
const imported = new Set();
for (const stmt of consumer.statements) {
  if (!ts.isImportDeclaration(stmt) || stmt.moduleSpecifier.text !== "fuselm") continue;
  const bindings = stmt.importClause?.namedBindings;
  if (bindings && ts.isNamedImports(bindings)) for (const el of bindings.elements) imported.add((el.propertyName ?? el.name).text);
}
const missing = exported.filter((name) => !imported.has(name)).sort();
if (missing.length > 0) {
  console.error(`check-consumer: tests/ts/consumer/consumer.ts does not use these exports of fuselm: ${missing.join(", ")}`);
  process.exit(1);
}
console.log(`check-consumer: the consumer imports all ${exported.length} exports of fuselm`);
