import { readdirSync, readFileSync, statSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join, relative, sep } from 'node:path';
import ts from 'typescript';

/** One import of a package its workspace does not declare where it must. */
export interface UndeclaredImport {
  workspace: string;
  /** The file, relative to the repository. */
  file: string;
  specifier: string;
  /** The package the specifier names (`@trpc/server` for `@trpc/server/adapters/fetch`). */
  packageName: string;
  /** Why it is refused. */
  problem: 'undeclared' | 'dev-only in shipped code';
}

interface PackageJson {
  name?: string;
  private?: boolean;
  workspaces?: string[];
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/** One package name imported by one file, with how (a type-only import is satisfied by `@types/…` too). */
export interface ImportedPackage {
  specifier: string;
  packageName: string;
  typeOnly: boolean;
}

const SOURCE = /\.(?:[cm]?[jt]s|tsx|jsx)$/;
/** Build output, caches and dependencies: not the workspace's own source. */
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'build', 'coverage', 'out']);

/**
 * Checks every workspace of the repository at `root`: each bare import (static, dynamic, `require`, `require.resolve`,
 * `import.meta.resolve`, `import('x')` types, `/// <reference types>`) in its source must name a package its
 * package.json declares (any dependency field), the root package.json declares (the monorepo's shared tooling,
 * which Node finds from every workspace without hoisting), the workspace itself, or a Node builtin. A published
 * workspace's shipped code (`src/`, tests excluded) may only use its `dependencies` and `peerDependencies`: a
 * devDependency is absent where it is installed.
 */
export function findUndeclaredImports(root: string): UndeclaredImport[] {
  const rootPackage = readPackage(root);
  const shared = declaredNames(rootPackage);
  const found: UndeclaredImport[] = [];
  for (const dir of workspaceDirs(root, rootPackage.workspaces ?? [])) {
    const pkg = readPackage(dir);
    const workspace = pkg.name ?? relative(root, dir);
    const declared = declaredNames(pkg);
    const runtime = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})]);
    const aliases = pathAliases(dir);
    for (const file of sourceFiles(dir)) {
      const shipped = !pkg.private && isShipped(relative(dir, file));
      for (const imported of importsOf(file)) {
        const { specifier, packageName } = imported;
        if (aliases.some((prefix) => specifier.startsWith(prefix)) || packageName === pkg.name) continue;
        const names = imported.typeOnly ? [packageName, typesPackage(packageName)] : [packageName];
        const where = { workspace, file: relative(root, file), specifier, packageName };
        if (!names.some((name) => declared.has(name) || shared.has(name))) {
          found.push({ ...where, problem: 'undeclared' });
        } else if (shipped && !names.some((name) => runtime.has(name))) {
          found.push({ ...where, problem: 'dev-only in shipped code' });
        }
      }
    }
  }
  return found;
}

/** The packages one file names. Relative paths, builtins, `#` subpath imports and URLs are not packages. */
export function importsOf(file: string): ImportedPackage[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const found: ImportedPackage[] = [];
  const add = (node: ts.Node | undefined, typeOnly: boolean) => {
    if (!node || !ts.isStringLiteralLike(node)) return;
    const packageName = packageOf(node.text);
    if (packageName) found.push({ specifier: node.text, packageName, typeOnly });
  };
  for (const ref of source.typeReferenceDirectives) {
    const packageName = packageOf(ref.fileName);
    if (packageName) found.push({ specifier: ref.fileName, packageName, typeOnly: true });
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      add(node.moduleSpecifier, isTypeOnlyImport(node));
    } else if (ts.isExportDeclaration(node)) {
      add(node.moduleSpecifier, node.isTypeOnly);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      add(node.moduleReference.expression, node.isTypeOnly);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      add(node.argument.literal, true);
    } else if (ts.isCallExpression(node) && isModuleCall(node.expression)) {
      add(node.arguments[0], false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** `import(…)`, `require(…)`, `require.resolve(…)`, `createRequire(…).resolve(…)`, `import.meta.resolve(…)`. */
function isModuleCall(callee: ts.Expression): boolean {
  if (callee.kind === ts.SyntaxKind.ImportKeyword) return true;
  if (ts.isIdentifier(callee)) return callee.text === 'require';
  if (!ts.isPropertyAccessExpression(callee) || callee.name.text !== 'resolve') return false;
  const target = callee.expression;
  return (
    (ts.isIdentifier(target) && target.text === 'require') ||
    (ts.isCallExpression(target) && ts.isIdentifier(target.expression) && target.expression.text === 'createRequire') ||
    (ts.isMetaProperty(target) && target.keywordToken === ts.SyntaxKind.ImportKeyword)
  );
}

/** `import type { A }`, or `import { type A, type B }` (every binding a type): erased from the emitted code. */
function isTypeOnlyImport(node: ts.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (!clause) return false;
  if (clause.isTypeOnly) return true;
  const bindings = clause.namedBindings;
  return (
    !clause.name &&
    bindings !== undefined &&
    ts.isNamedImports(bindings) &&
    bindings.elements.length > 0 &&
    bindings.elements.every((element) => element.isTypeOnly)
  );
}

/** The package a specifier names: `@scope/name` or `name`, without a subpath; undefined when it names none. */
export function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('#')) return undefined;
  if (isBuiltin(specifier) || /^[a-z][a-z0-9+.-]*:/i.test(specifier)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** DefinitelyTyped's name for a package's types: `@types/pg`, `@types/scope__name`. */
function typesPackage(name: string): string {
  return `@types/${name.startsWith('@') ? name.slice(1).replace('/', '__') : name}`;
}

function declaredNames(pkg: PackageJson): Set<string> {
  return new Set(
    [pkg.dependencies, pkg.devDependencies, pkg.peerDependencies, pkg.optionalDependencies].flatMap((field) =>
      Object.keys(field ?? {}),
    ),
  );
}

/** What `npm publish` ships of a published workspace's source: `src/` without its tests (the packages' `files`). */
function isShipped(path: string): boolean {
  const parts = path.split(sep);
  return parts[0] === 'src' && !parts.includes('__tests__') && !/\.test(?:-d)?\.[cm]?[jt]sx?$/.test(path);
}

/** The prefixes of the workspace's tsconfig `paths` (`@/` for `@/*`): the workspace's own files. */
function pathAliases(dir: string): string[] {
  const config = join(dir, 'tsconfig.json');
  if (!exists(config)) return [];
  const { config: parsed } = ts.readConfigFile(config, ts.sys.readFile);
  const paths = (parsed?.compilerOptions?.paths ?? {}) as Record<string, string[]>;
  return Object.keys(paths).map((pattern) => pattern.replace(/\*$/, ''));
}

/** Each folder the root's `workspaces` names (`packages/*` or `test`) that holds a package.json. */
function workspaceDirs(root: string, patterns: string[]): string[] {
  return patterns.flatMap((pattern) => {
    const dirs = pattern.endsWith('/*')
      ? readdirSync(join(root, pattern.slice(0, -2)), { withFileTypes: true })
          .filter((entry) => entry.isDirectory())
          .map((entry) => join(root, pattern.slice(0, -2), entry.name))
      : [join(root, pattern)];
    return dirs.filter((dir) => exists(join(dir, 'package.json')));
  });
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      return entry.name.startsWith('.') || SKIPPED_DIRS.has(entry.name) ? [] : sourceFiles(path);
    }
    return entry.isFile() && SOURCE.test(entry.name) ? [path] : [];
  });
}

function readPackage(dir: string): PackageJson {
  return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as PackageJson;
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}
