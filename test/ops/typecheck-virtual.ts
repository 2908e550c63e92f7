/**
 * Type-checks one in-memory TypeScript file (the manifests as typed objects, e.g.
 * `export const o0: IoK8sApiBatchV1Job = {...}`) with the project's TypeScript, as if it were on
 * disk at `virtual`: excess or mistyped properties in a manifest show up as diagnostics.
 */
import ts from 'typescript';

export function typecheckVirtual(virtual: string, text: string): readonly ts.Diagnostic[] {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2023,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const readFile = host.readFile.bind(host);
  host.getSourceFile = (f, lang, ...rest) => (f === virtual ? ts.createSourceFile(f, text, lang) : getSourceFile(f, lang, ...rest));
  host.fileExists = (f) => f === virtual || fileExists(f);
  host.readFile = (f) => (f === virtual ? text : readFile(f));
  return ts.getPreEmitDiagnostics(ts.createProgram([virtual], options, host));
}
