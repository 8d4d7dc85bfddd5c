// The status bar item: idle, starting, profiling `fn`…, the last verdict, or what is wrong.

import * as vscode from 'vscode';

const BOUND_ICON: Record<string, string> = {
  overhead: '$(warning)',
  memory: '$(warning)',
  host: '$(warning)',
  compute: '$(pass)',
};

export class Status implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;

  constructor() {
    this.item = vscode.window.createStatusBarItem('kernelscope.status', vscode.StatusBarAlignment.Left, 50);
    this.item.name = 'Kernelscope';
    this.starting();
    this.item.show();
  }

  starting(): void {
    this.set('$(loading~spin) kernelscope: starting', 'Kernelscope: starting the language server', 'kernelscope.showOutput');
  }

  idle(detail: string): void {
    this.set('$(flame) kernelscope', `Kernelscope: ready (${detail}). Click for the last report.`, 'kernelscope.showLastReport');
  }

  profiling(qualname: string): void {
    this.set(`$(sync~spin) profiling ${qualname}…`, `Kernelscope: profiling ${qualname}`, 'kernelscope.showOutput');
  }

  verdict(qualname: string, bound: string | null | undefined, summary: string, imported = false): void {
    const icon = (bound && BOUND_ICON[bound]) ?? '$(flame)';
    const label = bound ? `${bound}-bound` : 'done';
    const tooltip = new vscode.MarkdownString(
      `**Kernelscope: ${qualname}**${imported ? ' (imported run)' : ''}\n\n${summary || label}\n\nClick for the report.`,
    );
    this.set(`${icon} ${qualname}: ${label}`, tooltip, 'kernelscope.showLastReport');
  }

  failed(qualname: string, message: string): void {
    this.set(`$(error) ${qualname}: failed`, `Kernelscope: ${qualname}: ${message}`, 'kernelscope.showOutput');
  }

  cancelled(qualname: string): void {
    this.set(`$(circle-slash) ${qualname}: cancelled`, 'Kernelscope: the run was cancelled', 'kernelscope.showLastReport');
  }

  problem(text: string, tooltip: string, command: string): void {
    this.set(`$(warning) ${text}`, tooltip, command);
  }

  restricted(): void {
    this.set(
      '$(shield) kernelscope',
      'Kernelscope: Restricted Mode. Earlier runs are shown; profiling needs a trusted workspace.',
      'workbench.trust.manage',
    );
  }

  private set(text: string, tooltip: string | vscode.MarkdownString, command: string): void {
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.command = command;
  }

  dispose(): void {
    this.item.dispose();
  }
}
