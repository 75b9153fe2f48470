// No `any` in the package's shipped types.
//
// 1. Every `any` written in dist/**/*.d.ts (found with TypeScript's parser, so comments don't
//    count) fails the test. wasm-bindgen types the raw wasm ABI (`InitOutput` in
//    dist/wasm/fuselm.d.ts, all of dist/wasm/fuselm_bg.wasm.d.ts) with `any`; scripts/build-npm
//    rewrites those as `unknown`, so no exception is left (the mechanism for one stays).
// 2. None of that is reachable from the public entry: the type checker walks every export of
//    dist/index.d.ts (properties, call/construct signatures, parameters, results, type arguments,
//    union members, index signatures) and fails on an `any` type or on reaching an allowed
//    wasm-bindgen declaration. (package.json's "exports" keeps deep imports of dist/wasm/ out.)
//    `any` that TypeScript's lib puts in as a type parameter's default (AsyncIterator<T> is
//    AsyncIterator<T, any, any>) is printed, not failed: the .d.ts did not write it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { root } from "./common.mjs";

// FUSELM_PKG_DIST: another built dist/ to check (paths are reported relative to its parent).
const dist = process.env.FUSELM_PKG_DIST ?? join(root, "dist");
const rel = (p) => relative(join(dist, ".."), p);
// scripts/build-npm rewrites wasm-bindgen's raw-ABI `any` as `unknown`, so nothing is allowed.
const ALLOWED_FILES = [];
const ALLOWED_DECLS = [];

const dtsFiles = readdirSync(dist, { recursive: true })
  .filter((f) => f.endsWith(".d.ts"))
  .map((f) => join(dist, f))
  .sort();

/** The name of a top-level statement (interface X, type X, function x, class X, const x). */
function topName(stmt) {
  if (stmt.name) return stmt.name.text;
  if (ts.isVariableStatement(stmt)) return stmt.declarationList.declarations.map((d) => d.name.getText()).join(",");
  return ts.SyntaxKind[stmt.kind];
}

/** Where a node sits: "Top.member.member". */
function where(node) {
  const names = [];
  for (let n = node; n && !ts.isSourceFile(n); n = n.parent) {
    if (n.name && (ts.isIdentifier(n.name) || ts.isStringLiteral(n.name) || ts.isPrivateIdentifier(n.name))) names.unshift(n.name.text);
    else if (ts.isVariableDeclaration(n)) names.unshift(n.name.getText());
  }
  return [...new Set(names)].join(".");
}

const isAllowed = (file, top) =>
  ALLOWED_FILES.includes(rel(file)) || ALLOWED_DECLS.some(([f, name]) => f === rel(file) && name === top);

test("the shipped .d.ts files have no `any` outside wasm-bindgen's raw ABI", () => {
  assert.ok(dtsFiles.length > 0, "no dist/**/*.d.ts: run scripts/build-npm first");
  const bad = [];
  const allowed = new Map();
  for (const file of dtsFiles) {
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    for (const stmt of source.statements) {
      const visit = (node) => {
        if (node.kind === ts.SyntaxKind.AnyKeyword) {
          const { line } = source.getLineAndCharacterOfPosition(node.getStart());
          const at = `${rel(file)}:${line + 1} ${where(node)}`;
          if (isAllowed(file, topName(stmt))) {
            const key = ALLOWED_FILES.includes(rel(file)) ? rel(file) : `${rel(file)} ${topName(stmt)}`;
            allowed.set(key, [...(allowed.get(key) ?? []), where(node)]);
          } else bad.push(`${at}: ${node.parent.getText().slice(0, 120)}`);
        }
        ts.forEachChild(node, visit);
      };
      visit(stmt);
    }
  }
  for (const [key, at] of allowed) {
    console.log(`allowed (wasm-bindgen raw ABI): ${at.length} \`any\` in ${key}: ${[...new Set(at)].join(", ")}`);
  }
  assert.deepEqual(bad, [], "`any` in the shipped types");
});

test("no `any` is reachable from the exports of dist/index.d.ts", () => {
  const index = join(dist, "index.d.ts");
  const program = ts.createProgram([index], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts", "lib.dom.asynciterable.d.ts"],
  });
  const checker = program.getTypeChecker();
  const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(index));
  const exports = checker.getExportsOfModule(moduleSymbol);
  assert.ok(exports.length > 0, "dist/index.d.ts exports nothing");

  const fromLib = (decl) => program.isSourceFileDefaultLibrary(decl.getSourceFile());
  const topOf = (decl) => {
    let top = decl;
    while (top.parent && !ts.isSourceFile(top.parent)) top = top.parent;
    return top;
  };
  const allowedDecl = (decl) => isAllowed(decl.getSourceFile().fileName, topName(topOf(decl)));
  const isPrivate = (sym) =>
    (sym.declarations ?? []).some(
      (d) => (d.name && ts.isPrivateIdentifier(d.name)) || ts.getCombinedModifierFlags(d) & ts.ModifierFlags.Private,
    );

  const problems = [];
  const libDefaults = new Map();
  const seen = new Set();
  const walk = (type, path) => {
    if (type.flags & ts.TypeFlags.Any) {
      problems.push(`${path}: any`);
      return;
    }
    if (seen.has(type)) return;
    seen.add(type);
    const decls = [...(type.getSymbol()?.declarations ?? []), ...(type.aliasSymbol?.declarations ?? [])];
    const bad = decls.find(allowedDecl);
    if (bad) {
      problems.push(`${path}: reaches wasm-bindgen's ${topName(topOf(bad))} (${rel(bad.getSourceFile().fileName)})`);
      return;
    }
    for (const arg of type.aliasTypeArguments ?? []) walk(arg, `${path}<>`);
    if (type.isUnionOrIntersection()) type.types.forEach((t) => walk(t, path));
    if (type.flags & ts.TypeFlags.Conditional) {
      const root = type.root?.node;
      if (root) for (const n of [root.checkType, root.extendsType, root.trueType, root.falseType]) walk(checker.getTypeFromTypeNode(n), `${path}?:`);
    }
    if (type.flags & ts.TypeFlags.TypeParameter) {
      const c = checker.getBaseConstraintOfType(type);
      if (c && c !== type) walk(c, `${path} extends`);
    }
    if (!(type.flags & ts.TypeFlags.Object)) return;
    const lib = decls.length > 0 && decls.every(fromLib);
    if (type.objectFlags & ts.ObjectFlags.Reference) {
      const params = type.target.typeParameters ?? [];
      checker.getTypeArguments(type).forEach((t, i) => {
        // TypeScript's own defaults, e.g. AsyncIterable<T, TReturn = any, TNext = any>: the .d.ts
        // wrote AsyncIterable<X>. Listed, not failed (an explicit `any` fails the scan above).
        const dflt = params[i] && checker.getDefaultFromTypeParameter(params[i]);
        if (lib && t.flags & ts.TypeFlags.Any && dflt && dflt.flags & ts.TypeFlags.Any) {
          const key = checker.typeToString(type);
          libDefaults.set(key, [...(libDefaults.get(key) ?? []), params[i].symbol.name]);
        } else walk(t, `${path}<${i}>`);
      });
    }
    // Library types (Promise, Response, AbortSignal, …) are not ours to check: only their arguments.
    if (lib) return;
    for (const prop of checker.getPropertiesOfType(type)) {
      if (isPrivate(prop)) continue;
      walk(checker.getTypeOfSymbol(prop), `${path}.${prop.getName()}`);
    }
    const sigs = [...type.getCallSignatures(), ...type.getConstructSignatures()];
    for (const sig of sigs) {
      for (const tp of sig.getTypeParameters() ?? []) walk(tp, `${path}<${tp.symbol.name}>`);
      for (const p of sig.getParameters()) walk(checker.getTypeOfSymbol(p), `${path}(${p.getName()})`);
      walk(sig.getReturnType(), `${path}()`);
    }
    for (const info of checker.getIndexInfosOfType(type)) walk(info.type, `${path}[]`);
  };

  for (const sym of exports) {
    const target = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
    if (target.flags & ts.SymbolFlags.Value) walk(checker.getTypeOfSymbol(target), sym.getName());
    if (target.flags & ts.SymbolFlags.Type) walk(checker.getDeclaredTypeOfSymbol(target), sym.getName());
  }
  for (const [t, names] of libDefaults) console.log(`TypeScript lib default, not fuselm's: ${t} (${names.join(", ")} = any)`);
  console.log(`walked ${seen.size} types reachable from ${exports.length} exports of dist/index.d.ts`);
  assert.deepEqual(problems, [], "`any` reachable from the public API");
});
