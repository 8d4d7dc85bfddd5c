// The kernelscope VS Code extension: a thin client of `kernelscope serve`.
//
// The server owns the features (the "Profile `fn`" code action, progress, diagnostics, code
// lenses, inlay hints, hovers, Perfetto); this extension starts it with the right Python, adds
// palette commands, a status bar item and an output channel, and keeps profiling out of
// untrusted workspaces.

import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  CodeAction,
  CodeActionKind as LspCodeActionKind,
  CodeActionRequest,
  CodeActionTriggerKind,
  Command,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ResponseError,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from 'vscode-languageclient/node';
import {
  checkKernelscope,
  describeSource,
  Interpreter,
  onPythonEnvironmentChange,
  pipCommand,
  resolveInterpreter,
} from './interpreter';
import { registerMcpServer } from './mcp';
import { showProgressAsNotifications } from './progress';
import type { CompareReply, ImportTraceReply, LastReportReply, MemoryFitReply, OpenTraceReply, ProfileReply, TryReply } from './replies';
import { Status } from './status';

// The server's commands (server/kernelscope/lsp/server.py); their replies are in ./replies.ts.
const PROFILE = 'kernelscope.profile';
const OPEN_TRACE = 'kernelscope.openTrace';
const LAST_REPORT = 'kernelscope.lastReport';
const COMPARE = 'kernelscope.compare';
const TRY = 'kernelscope.try';
const IMPORT_TRACE = 'kernelscope.importTrace';
const MEMORY_FIT = 'kernelscope.memoryFit';
const REPORT_SCHEME = 'kernelscope-report';

/** The parts of a LastReportReply's report (kernelscope.report.schema.Report) read here. */
interface ReportFields {
  output?: string;
  output_truncated?: boolean;
  function?: { qualname?: string };
}

interface ProfileAction {
  title: string;
  args: unknown[];
  qualname: string;
}

interface RunRef {
  runId: string;
  qualname: string;
}

class NotReady extends Error {}

class Kernelscope implements vscode.Disposable {
  readonly channel = vscode.window.createOutputChannel('Kernelscope', { log: true });
  readonly status = new Status();
  private client: LanguageClient | undefined;
  private interpreter: Interpreter | undefined;
  private lastRun: RunRef | undefined;
  private starting: Promise<void> | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly reports = new Map<string, string>();
  private readonly reportChanged = new vscode.EventEmitter<vscode.Uri>();
  /** Fires when the MCP server's definition may have changed (interpreter, trust). */
  readonly mcpChanged = new vscode.EventEmitter<void>();

  constructor(context: vscode.ExtensionContext) {
    context.subscriptions.push(this.channel, this.status, this.reportChanged, this.mcpChanged);
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(REPORT_SCHEME, {
        onDidChange: this.reportChanged.event,
        provideTextDocumentContent: (uri) => this.reports.get(uri.toString()) ?? '(this report is gone: run Show Last Report again)',
      }),
    );
  }

  // --- the server's lifecycle ---------------------------------------------------------

  /** Starts the server (once at a time); a missing kernelscope is explained, not thrown. */
  start(): Promise<void> {
    this.starting ??= this.doStart().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  async restart(): Promise<void> {
    await this.starting;
    await this.stop();
    await this.start();
    this.mcpChanged.fire();
  }

  private async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        if (client.state !== State.Stopped) {
          await client.stop(5000);
        }
      } catch (e) {
        this.channel.warn(`stopping the server: ${String(e)}`);
      }
      await client.dispose().catch(() => undefined);
    }
  }

  private async doStart(): Promise<void> {
    this.status.starting();
    const resource = vscode.window.activeTextEditor?.document.uri;
    const interpreter = await resolveInterpreter(resource, (l) => this.channel.info(l));
    this.interpreter = interpreter;
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const check = await checkKernelscope(interpreter.command, cwd);
    if (!check.ok) {
      this.explainMissing(interpreter, check.reason, check.detail);
      return;
    }
    this.channel.info(
      `starting: ${interpreter.command} -m kernelscope serve (kernelscope ${check.version}; ${describeSource(interpreter.source)})`,
    );
    const serverOptions: ServerOptions = {
      command: interpreter.command,
      args: ['-m', 'kernelscope', 'serve'],
      options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    const clientOptions: LanguageClientOptions = {
      // Python files, and the Python cells of Jupyter notebooks (synced as notebooks: the
      // server declares notebookDocumentSync, so the cells are not sent as text documents).
      documentSelector: [
        { scheme: 'file', language: 'python' },
        { notebook: 'jupyter-notebook', language: 'python' },
      ],
      synchronize: { configurationSection: 'kernelscope' },
      outputChannel: this.channel,
      // The hover's "Open trace in Perfetto" is a command: link; allow that one command.
      markdown: { isTrusted: { enabledCommands: [OPEN_TRACE] }, supportHtml: false },
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // Server and worker logs are plain stderr lines: keep them at info level.
      stdioOptions: {
        stdout: (input, channel) => input.on('data', (d: Buffer) => channel.info(d.toString().trimEnd())),
        stderr: (input, channel) => {
          let pending = '';
          input.on('data', (d: Buffer) => {
            const lines = (pending + d.toString()).split('\n');
            pending = lines.pop() ?? '';
            for (const line of lines) {
              // pygls logs every JSON-RPC message at info: keep those for the Trace log level.
              if (line.startsWith('pygls.')) {
                channel.trace(`[server] ${line}`);
              } else {
                channel.info(`[server] ${line}`);
              }
            }
          });
        },
      },
      middleware: {
        executeCommand: (command, args, next) => this.onServerCommand(command, args, next),
        window: {
          // Open Perfetto with the URL exactly as the server wrote it: a vscode.Uri would
          // percent-encode the `#!/?url=http://…` fragment that ui.perfetto.dev reads.
          showDocument: async (params, token, next) => {
            if (params.external && /^https?:/.test(params.uri)) {
              this.channel.info(`opening ${params.uri}`);
              const success = await vscode.env.openExternal(params.uri as unknown as vscode.Uri);
              return { success };
            }
            return next(params, token);
          },
        },
      },
    };
    const client = new LanguageClient('kernelscope', 'Kernelscope', serverOptions, clientOptions);
    this.client = client;
    try {
      await client.start();
    } catch (e) {
      this.client = undefined;
      this.status.problem('kernelscope: server failed', `The server did not start: ${String(e)}`, 'kernelscope.showOutput');
      void vscode.window
        .showErrorMessage(`Kernelscope: the language server did not start (${interpreter.command}): ${String(e)}`, 'Show Output')
        .then((pick) => pick && this.channel.show());
      return;
    }
    this.disposables.push(showProgressAsNotifications(client));
    const ready = () => {
      if (vscode.workspace.isTrusted) {
        this.status.idle(`kernelscope ${check.version}, ${interpreter.command}`);
      } else {
        this.status.restricted();
      }
    };
    // vscode-languageclient restarts a crashed server a few times by itself.
    client.onDidChangeState((e) => {
      if (this.client !== client) {
        return;
      }
      if (e.newState === State.Stopped) {
        this.status.problem('kernelscope: stopped', 'The kernelscope server stopped. Click to restart it.', 'kernelscope.restartServer');
      } else if (e.newState === State.Running) {
        ready();
      }
    });
    ready();
  }

  private explainMissing(interpreter: Interpreter, reason: string, detail: string): void {
    const python = interpreter.command;
    const pip = pipCommand(python);
    const where = describeSource(interpreter.source);
    let message: string;
    if (reason === 'not-found') {
      message = `Kernelscope: cannot run ${python} (${where}). Set kernelscope.server.python to a Python with kernelscope installed (python -m pip install kernelscope).`;
    } else if (reason === 'not-installed') {
      message = `Kernelscope: kernelscope is not installed for ${python} (${where}). Install it with: ${pip}`;
    } else {
      message = `Kernelscope: ${python} (${where}) cannot import kernelscope: ${detail.split('\n').pop()}. Reinstall it with: ${pip}`;
    }
    this.channel.error(message);
    if (detail) {
      this.channel.error(detail);
    }
    this.status.problem('kernelscope: not installed', message, 'kernelscope.restartServer');
    const actions = reason === 'not-found' ? ['Open Settings'] : ['Install in Terminal', 'Copy Command', 'Open Settings'];
    void vscode.window.showErrorMessage(message, ...actions).then(async (pick) => {
      if (pick === 'Install in Terminal') {
        const terminal = vscode.window.createTerminal('kernelscope: pip install');
        terminal.show();
        terminal.sendText(pip);
        const again = await vscode.window.showInformationMessage('Kernelscope: restart the server once pip has finished.', 'Restart Server');
        if (again) {
          await this.restart();
        }
      } else if (pick === 'Copy Command') {
        await vscode.env.clipboard.writeText(pip);
      } else if (pick === 'Open Settings') {
        await vscode.commands.executeCommand('workbench.action.openSettings', 'kernelscope.server.python');
      }
    });
  }

  private ready(): LanguageClient {
    const client = this.client;
    if (!client || client.state !== State.Running) {
      throw new NotReady('the kernelscope server is not running (see the Kernelscope output); try "Kernelscope: Restart Server"');
    }
    return client;
  }

  private async request<T>(command: string, args: unknown[]): Promise<T> {
    await this.starting;
    return (await this.ready().sendRequest(ExecuteCommandRequest.type, { command, arguments: args })) as T;
  }

  // --- the server's commands, as run from code actions, lenses and the palette ---------

  private async onServerCommand(command: string, args: unknown[], next: (command: string, args: unknown[]) => unknown): Promise<unknown> {
    try {
      switch (command) {
        case PROFILE:
          return await this.profile(args);
        case IMPORT_TRACE:
          return await this.importTrace(args);
        case OPEN_TRACE:
          return await this.request<OpenTraceReply>(OPEN_TRACE, args);
        case TRY:
          return await this.tryVariants(args);
        default:
          return await next(command, args);
      }
    } catch (e) {
      this.showError(e);
      return undefined;
    }
  }

  /** "Try X on `fn`": the variants run in the server's worker; the best one is announced. */
  private async tryVariants(args: unknown[]): Promise<TryReply | undefined> {
    const fn = typeof args[1] === 'string' ? args[1] : '?';
    if (!vscode.workspace.isTrusted) {
      const message = `Kernelscope: trying variants of ${fn} would run this workspace's code, and the workspace is not trusted (Restricted Mode).`;
      this.channel.warn(message);
      void vscode.window.showWarningMessage(message);
      return { ok: false, error: { kind: 'untrusted', message, path: null, line: null } };
    }
    this.channel.info(`trying variants of ${fn}`);
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Kernelscope: trying variants of ${fn}` },
      () => this.request<TryReply>(TRY, args),
    );
    for (const line of result.summaries ?? []) {
      this.channel.info(`  ${line}`);
    }
    if (!result.ok) {
      this.channel.warn(`trying ${fn} failed: ${result.error?.message ?? 'cancelled'}`);
    }
    return result;
  }

  private async profile(args: unknown[]): Promise<ProfileReply | undefined> {
    const options = (typeof args[2] === 'object' && args[2] !== null ? args[2] : {}) as { remote?: unknown };
    const fn = typeof args[1] === 'string' ? args[1] : '?';
    const qualname = typeof options.remote === 'string' ? `${fn} on ${options.remote}` : fn;
    if (!vscode.workspace.isTrusted) {
      const message = `Kernelscope: profiling ${qualname} would run this workspace's code, and the workspace is not trusted (Restricted Mode). Trust it to profile; earlier results stay visible.`;
      this.channel.warn(message);
      void vscode.window.showWarningMessage(message, 'Manage Workspace Trust').then((pick) => {
        if (pick) {
          void vscode.commands.executeCommand('workbench.trust.manage');
        }
      });
      return { ok: false, error: { kind: 'untrusted', message, path: null, line: null } };
    }
    const file = typeof args[0] === 'string' ? vscode.Uri.parse(args[0]).fsPath : '?';
    this.status.profiling(qualname);
    this.channel.info(`profiling ${qualname} (${file})`);
    let result: ProfileReply;
    try {
      result = await this.request<ProfileReply>(PROFILE, args);
    } catch (e) {
      this.status.failed(qualname, errorText(e));
      throw e;
    }
    if (result.ok && result.run_id !== undefined) {
      this.lastRun = { runId: result.run_id, qualname: fn };
      this.status.verdict(qualname, result.bound, result.summary ?? '');
      this.channel.info(`${qualname}: ${result.summary || 'done'} (run ${result.run_id}; trace ${result.trace ?? '?'})`);
      await this.showOutputOf(result.run_id, qualname);
    } else if (result.cancelled) {
      this.status.cancelled(qualname);
      this.channel.info(`${qualname}: cancelled`);
    } else {
      const message = result.error?.message ?? 'failed';
      this.status.failed(qualname, message);
      this.channel.error(`${qualname}: ${result.error?.kind ?? 'error'}: ${message}`);
    }
    return result;
  }

  /** What the function printed during the run (the report's `output`), into the channel. */
  private async showOutputOf(runId: string, qualname: string): Promise<void> {
    let report: LastReportReply;
    try {
      report = await this.request<LastReportReply>(LAST_REPORT, [runId]);
    } catch (e) {
      this.channel.warn(`could not read the report of run ${runId}: ${errorText(e)}`);
      return;
    }
    const fields = report.report as ReportFields;
    const output = fields.output ?? '';
    if (!output) {
      this.channel.info(`${qualname} printed nothing`);
      return;
    }
    const truncated = fields.output_truncated ? ' (the last 64 KiB)' : '';
    this.channel.info(`output of ${qualname}${truncated}:`);
    for (const line of output.replace(/\n$/, '').split('\n')) {
      this.channel.info(`  | ${line}`);
    }
  }

  private async importTrace(args: unknown[]): Promise<ImportTraceReply> {
    const qualname = typeof args[1] === 'string' ? args[1] : '?';
    const result = await this.request<ImportTraceReply>(IMPORT_TRACE, args);
    this.lastRun = { runId: result.run_id, qualname };
    this.status.verdict(qualname, result.bound, result.summary, true);
    this.channel.info(`${qualname}: imported ${String(args[2])}: ${result.summary} (run ${result.run_id})`);
    return result;
  }

  // --- palette commands ---------------------------------------------------------------

  /** Asks the server for its "Profile `fn`" code action at the cursor and runs it; with
   * remotes defined, the server offers one per remote too ("Profile `fn` on gpu"): pick one. */
  async profileAtCursor(): Promise<void> {
    const actions = await this.profileActionsAtCursor();
    let action = actions[0];
    if (actions.length > 1) {
      const pick = await vscode.window.showQuickPick(
        actions.map((a) => ({ label: a.title, action: a })),
        { title: 'Kernelscope: where to profile' },
      );
      if (!pick) {
        return;
      }
      action = pick.action;
    }
    if (action) {
      await vscode.commands.executeCommand(PROFILE, ...action.args);
    }
  }

  async openTraceInPerfetto(): Promise<void> {
    await vscode.commands.executeCommand(OPEN_TRACE, ...this.runArgs());
  }

  /** The last run's report as text, in a read-only editor beside the code. */
  async showLastReport(): Promise<void> {
    const report = await this.request<LastReportReply>(LAST_REPORT, this.runArgs());
    const qualname = (report.report as ReportFields).function?.qualname ?? 'report';
    const uri = vscode.Uri.from({ scheme: REPORT_SCHEME, path: `/${qualname} ${report.run_id}.txt` });
    this.reports.set(uri.toString(), report.text);
    this.reportChanged.fire(uri);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true });
  }

  /** The last run against the one before it: the per-op diff, beside the editor. */
  async compareWithPrevious(): Promise<void> {
    const reply = await this.request<CompareReply>(COMPARE, this.runArgs());
    const uri = vscode.Uri.from({
      scheme: REPORT_SCHEME,
      path: `/diff ${reply.previous_run_id} ${reply.run_id}.txt`,
    });
    this.reports.set(uri.toString(), reply.text);
    this.reportChanged.fire(uri);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true });
  }

  /** "Will batch N fit?" for the function at the cursor: asks for N, runs the memory forecast
   * (the input provider at a few batch sizes, each in a fresh worker) and shows its answer,
   * with the whole forecast beside the editor. */
  async willBatchFit(batch?: number): Promise<void> {
    const action = (await this.profileActionsAtCursor())[0];
    if (!action) {
      return;
    }
    if (batch === undefined) {
      const text = await vscode.window.showInputBox({
        title: `Will batch N of ${action.qualname} fit in memory?`,
        prompt: 'The batch size N (passed to the input provider as batch_size)',
        validateInput: (v) => (/^[1-9][0-9]*$/.test(v.trim()) ? undefined : 'a whole number >= 1'),
      });
      if (!text) {
        return;
      }
      batch = Number(text.trim());
    }
    const reply = await this.request<MemoryFitReply>(MEMORY_FIT, [action.args[0], action.qualname, { batch }]);
    if (!reply.ok) {
      const why = reply.cancelled ? 'cancelled' : reply.error?.message ?? 'failed';
      void vscode.window.showWarningMessage(`Kernelscope: ${action.qualname}: ${why}`);
      return;
    }
    this.channel.info(`${action.qualname}: ${reply.answer ?? ''}`);
    const uri = vscode.Uri.from({ scheme: REPORT_SCHEME, path: `/memory ${action.qualname} batch ${batch}.txt` });
    this.reports.set(uri.toString(), reply.text ?? '');
    this.reportChanged.fire(uri);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true });
  }

  /** Shows a run recorded elsewhere (a GPU box, CI) as the last run of the function at the cursor. */
  async importTraceAtCursor(tracePath?: string, sidecarPath?: string): Promise<void> {
    const action = (await this.profileActionsAtCursor())[0];
    if (!action) {
      return;
    }
    if (!tracePath) {
      const picked = await vscode.window.showOpenDialog({
        title: `Import a torch.profiler trace as the last run of ${action.qualname}`,
        canSelectMany: false,
        filters: { 'torch.profiler traces': ['gz', 'json'] },
      });
      if (!picked || picked.length === 0) {
        return;
      }
      tracePath = picked[0].fsPath;
    }
    const args = [action.args[0], action.qualname, tracePath, ...(sidecarPath ? [sidecarPath] : [])];
    await vscode.commands.executeCommand(IMPORT_TRACE, ...args);
  }

  /** The server's "Profile `fn`" actions at the cursor (the local one first), one per title. */
  private async profileActionsAtCursor(): Promise<ProfileAction[]> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || !isProfilable(editor.document)) {
      void vscode.window.showInformationMessage('Kernelscope: put the cursor in a function of a Python file or notebook cell first.');
      return [];
    }
    await this.starting;
    const client = this.ready();
    const position = editor.selection.active;
    const uri = client.code2ProtocolConverter.asUri(editor.document.uri);
    const actions =
      (await client.sendRequest(CodeActionRequest.type, {
        textDocument: { uri },
        range: { start: position, end: position },
        context: { diagnostics: [], only: [LspCodeActionKind.Source], triggerKind: CodeActionTriggerKind.Invoked },
      })) ?? [];
    const found = new Map<string, ProfileAction>();
    for (const item of actions) {
      // A CodeAction carries its Command in `command`; a bare Command is its own.
      const command: Command | undefined = typeof item.command === 'string' ? (item as Command) : (item as CodeAction).command;
      if (command?.command === PROFILE && command.arguments && command.arguments.length >= 2 && !found.has(item.title)) {
        found.set(item.title, { title: item.title, args: command.arguments as unknown[], qualname: String(command.arguments[1]) });
      }
    }
    if (found.size === 0) {
      void vscode.window.showInformationMessage(
        `Kernelscope: line ${position.line + 1} of ${path.basename(editor.document.uri.fsPath)} is not inside a function.`,
      );
    }
    return [...found.values()];
  }

  /** (uri, cursor) in a Python editor: its function's last run, else this session's last run. */
  private runArgs(): unknown[] {
    const editor = vscode.window.activeTextEditor;
    if (editor && isProfilable(editor.document)) {
      const p = editor.selection.active;
      return [editor.document.uri.toString(), { line: p.line, character: p.character }];
    }
    if (this.lastRun) {
      return [this.lastRun.runId];
    }
    throw new NotReady('no profile yet: run "Kernelscope: Profile Function at Cursor" first');
  }

  showError(e: unknown): void {
    const text = errorText(e);
    this.channel.error(text);
    void vscode.window.showErrorMessage(`Kernelscope: ${text}`);
  }

  registerCommands(): void {
    const run = (fn: (...a: never[]) => Promise<void>) => async (...a: never[]) => {
      try {
        await fn.apply(this, a);
      } catch (e) {
        this.showError(e);
      }
    };
    const reg = (id: string, fn: (...a: never[]) => Promise<void>) =>
      this.disposables.push(vscode.commands.registerCommand(id, run(fn)));
    reg('kernelscope.profileFunctionAtCursor', this.profileAtCursor);
    reg('kernelscope.openTraceInPerfetto', this.openTraceInPerfetto);
    reg('kernelscope.showLastReport', this.showLastReport);
    reg('kernelscope.compareWithPrevious', this.compareWithPrevious);
    reg('kernelscope.restartServer', this.restart);
    reg('kernelscope.importTraceAtCursor', this.importTraceAtCursor as (...a: never[]) => Promise<void>);
    reg('kernelscope.showOutput', async () => this.channel.show(true));
    reg('kernelscope.willBatchFit', this.willBatchFit as (...a: never[]) => Promise<void>);
    // The end-to-end test imports a recorded H200 run through the real command path; the
    // command exists only when the test sets these variables.
    const fixtureTrace = process.env.KERNELSCOPE_E2E_TRACE;
    if (fixtureTrace) {
      reg('kernelscope.e2e.importFixtureTrace', () => this.importTraceAtCursor(fixtureTrace, process.env.KERNELSCOPE_E2E_SIDECAR));
      void vscode.commands.executeCommand('setContext', 'kernelscope.e2e', true);
    }
  }

  watchSettings(): void {
    this.disposables.push(
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('kernelscope.server.python')) {
          this.channel.info('kernelscope.server.python changed: restarting the server');
          void this.restart();
        }
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        this.channel.info('the workspace is trusted now: restarting the server with its settings');
        void this.restart();
      }),
    );
    void onPythonEnvironmentChange(() => {
      if (this.interpreter?.source === 'python-extension') {
        this.channel.info("the Python extension's environment changed: restarting the server");
        void this.restart();
      }
    }).then((d) => d && this.disposables.push(d));
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }

  async deactivate(): Promise<void> {
    await this.stop();
    this.dispose();
  }
}

/** A Python file, or a Python cell of a notebook (the server syncs Jupyter notebooks). */
function isProfilable(document: vscode.TextDocument): boolean {
  return document.languageId === 'python' && (document.uri.scheme === 'file' || document.uri.scheme === 'vscode-notebook-cell');
}

function errorText(e: unknown): string {
  if (e instanceof ResponseError || e instanceof Error) {
    return e.message;
  }
  return String(e);
}

let extension: Kernelscope | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extension = new Kernelscope(context);
  extension.registerCommands();
  extension.watchSettings();
  const ks = extension;
  registerMcpServer(context, String(context.extension.packageJSON.version), (l) => ks.channel.info(l), ks.mcpChanged.event);
  await extension.start();
}

export async function deactivate(): Promise<void> {
  await extension?.deactivate();
  extension = undefined;
}
