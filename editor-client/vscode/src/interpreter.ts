// Which Python runs `python -m kernelscope serve`, and whether kernelscope is installed there.
//
// Order: the `kernelscope.server.python` setting, else the Python extension's active
// environment (ms-python.python is optional: it is asked through its exported API when it is
// installed, never required), else `python3`.

import { execFile } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface Interpreter {
  /** What to exec: an absolute path or a command looked up on PATH. */
  command: string;
  source: InterpreterSource;
}

export type Check =
  | { ok: true; version: string }
  | { ok: false; reason: 'not-found' | 'not-installed' | 'broken'; detail: string };

export const PYTHON_EXTENSION_ID = 'ms-python.python';
const DEFAULT_PYTHON = process.platform === 'win32' ? 'python' : 'python3';

/** A readable name for where the interpreter came from, for messages. */
export function describeSource(source: InterpreterSource): string {
  switch (source) {
    case 'setting':
      return 'from the kernelscope.server.python setting';
    case 'python-extension':
      return "the Python extension's active environment";
    default:
      return `the default (${DEFAULT_PYTHON}); set kernelscope.server.python to choose another`;
  }
}

/** The pip command that installs kernelscope for `python`. */
export function pipCommand(python: string): string {
  const quoted = /[\s"'$`\\]/.test(python) ? `"${python.replace(/(["\\$`])/g, '\\$1')}"` : python;
  return `${quoted} -m pip install kernelscope`;
}

export async function resolveInterpreter(
  resource: vscode.Uri | undefined,
  log: (line: string) => void,
): Promise<Interpreter> {
  const configured = vscode.workspace
    .getConfiguration('kernelscope', resource)
    .get<string | null>('server.python');
  if (typeof configured === 'string' && configured.trim() !== '') {
    return { command: expand(configured.trim(), resource), source: 'setting' };
  }
  try {
    const fromExtension = await withTimeout(pythonExtensionInterpreter(resource), 15000);
    if (fromExtension) {
      return { command: fromExtension, source: 'python-extension' };
    }
  } catch (e) {
    log(`the Python extension did not give an interpreter: ${String(e)}`);
  }
  return { command: DEFAULT_PYTHON, source: 'default' };
}

/** Fires when the Python extension's active environment changes (if it is installed). */
export async function onPythonEnvironmentChange(
  listener: () => void,
): Promise<vscode.Disposable | undefined> {
  const api = await pythonExtensionApi();
  const event = api?.environments?.onDidChangeActiveEnvironmentPath;
  return typeof event === 'function' ? (event(listener) as vscode.Disposable) : undefined;
}

/** Runs `python -c "import kernelscope"`: the version, or why it cannot be used. */
export function checkKernelscope(python: string, cwd: string | undefined): Promise<Check> {
  const code = 'import kernelscope; print(kernelscope.__version__)';
  return new Promise((resolve) => {
    execFile(python, ['-c', code], { cwd, timeout: 30000 }, (error, stdout, stderr) => {
      if (!error) {
        resolve({ ok: true, version: stdout.trim() });
        return;
      }
      const err = error as NodeJS.ErrnoException;
      if (err.code === 'ENOENT' || err.code === 'EACCES') {
        resolve({ ok: false, reason: 'not-found', detail: `cannot run ${python} (${err.code})` });
      } else if (/No module named ['"]?kernelscope/.test(stderr)) {
        resolve({ ok: false, reason: 'not-installed', detail: stderr.trim().split('\n').pop() ?? '' });
      } else {
        resolve({ ok: false, reason: 'broken', detail: (stderr || err.message).trim() });
      }
    });
  });
}

// --- the optional Python extension --------------------------------------------------------

interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath?(resource?: vscode.Uri): { path: string } | undefined;
    resolveEnvironment?(
      env: { path: string } | string,
    ): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
  settings?: {
    getExecutionDetails?(resource?: vscode.Uri): { execCommand?: string[] } | undefined;
  };
}

async function pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
  if (!ext) {
    return undefined;
  }
  return ext.isActive ? ext.exports : await ext.activate();
}

async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const api = await pythonExtensionApi();
  const envs = api?.environments;
  if (envs?.getActiveEnvironmentPath && envs.resolveEnvironment) {
    const active = envs.getActiveEnvironmentPath(resource);
    if (active) {
      const env = await envs.resolveEnvironment(active);
      const exe = env?.executable?.uri?.fsPath;
      if (exe) {
        return exe;
      }
    }
  }
  const exec = api?.settings?.getExecutionDetails?.(resource)?.execCommand;
  return exec && exec.length > 0 && exec[0] ? exec[0] : undefined;
}

// --- helpers ------------------------------------------------------------------------------

function expand(value: string, resource?: vscode.Uri): string {
  const folder =
    (resource && vscode.workspace.getWorkspaceFolder(resource)) ?? vscode.workspace.workspaceFolders?.[0];
  let out = value.replace(/\$\{workspaceFolder\}/g, folder?.uri.fsPath ?? '');
  out = out.replace(/\$\{env:([^}]+)\}/g, (_, name: string) => process.env[name] ?? '');
  if (out === '~' || out.startsWith('~/')) {
    out = path.join(os.homedir(), out.slice(1));
  }
  // A relative path with a separator is relative to the workspace folder; a bare name is
  // looked up on PATH.
  if (!path.isAbsolute(out) && out.includes('/') && folder) {
    out = path.join(folder.uri.fsPath, out);
  }
  return out;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
